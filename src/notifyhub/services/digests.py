"""Digests (issue 41 item 3): a user's e-mails and pushes under one digest key, held in
PostgreSQL until the window closes, then sent as ONE delivery per channel.

Where things live, and why: a notification's digest item is written by the channel worker
in the same transaction as the rest of its chunk (services/channels.py), so it commits
with the chunk's progress or not at all; the digest's due time is a column of its row.
The digest worker (workers/digests.py) takes due digests `FOR UPDATE SKIP LOCKED`, adds
their deliveries to the outbox and closes them in one transaction: two workers never send
one digest twice, and a crash before the commit leaves it due for the next pass. Nothing
about a digest is in Redis, so losing Redis loses no digest (the outbox is the log).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ulid import ULID

from notifyhub.db.models import ChannelSend, DeliveryDefinition
from notifyhub.db.models import Digest as DigestRow
from notifyhub.db.repositories import digests as repo
from notifyhub.db.repositories import profiles, push_subscriptions
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.digest import SLIDING_CAP, Digest, opening_due, zone
from notifyhub.domain.notification import Channel, Severity
from notifyhub.errors import NotFound
from notifyhub.services.channels import URGENCY, ensure_definition, push_topic, pushed_notification
from notifyhub.services.deliveries import Kicker, enqueue_many_once
from notifyhub.services.webpush_target import webpush_payload

Clock = Callable[[], datetime]
Row = tuple[str, dict[str, Any], str | None]
"""An outbox delivery to add: its id, payload and description."""

EMAIL, PUSH = Channel.EMAIL.value, Channel.PUSH.value
EMAIL_DEFINITION, PUSH_DEFINITION = "email", "push"
"""The tenant's definitions a digest goes through (as a notification's e-mails and pushes)."""
DIGESTED = "digested"
"""A user's outcome on a channel in the routing trace: joined the digest."""
ITEM_FIELDS = ("id", "title", "body", "category", "severity", "action_url", "actor", "created_at")
"""What a digest item keeps of its notification."""
ITEM_BODY_CHARS = 500
SHOWN_LINES = 20
"""How many items a digest's plain-text body lists (all of them are in `digest.items`)."""
PUSH_TTL_S = 86_400
BATCH = 500
"""Digests one transaction of the worker sends at most (a few statements each: 500 cost
about a tenth less CPU per digest than 100 when thousands fall due at once)."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def item_of(notification: dict[str, Any]) -> dict[str, Any]:
    """What a digest keeps of a notification (a shortened body, no `data`)."""
    item = {k: notification[k] for k in ITEM_FIELDS if notification.get(k) is not None}
    if "body" in item:
        item["body"] = str(item["body"])[:ITEM_BODY_CHARS]
    return item


class DigestBook:
    """Adds a channel send's users to their open digests (in the chunk's transaction)."""

    def __init__(self, clock: Clock = utcnow) -> None:
        self._clock = clock

    async def add(
        self, unit: UnitOfWork, send: ChannelSend, wanted: dict[str, list[str]]
    ) -> list[str]:
        """Each user in `wanted` (user -> the channels their preferences take) joins
        their digest under the send's key, a few statements for the whole chunk; those
        whose digest this opens with `first: now`, to be sent the notification at once
        instead."""
        spec = Digest.model_validate(send.digest)
        session = unit.session
        zones = await repo.zones_of(session, send.tenant, list(wanted)) if spec.at else {}
        now = self._clock()
        openings = [
            repo.Opening(
                user, str(ULID.from_datetime(now)), opening_due(spec, now, zone(zones.get(user)))
            )
            for user in sorted(wanted)  # one lock order: chunks sharing users never deadlock
        ]
        first_now = spec.first == "now"
        found = await repo.open_or_join(
            session, send.tenant, spec.key, spec.model_dump(), openings, now, first_sent=first_now
        )
        at_once = [o.user for o in found if o.created and first_now]
        joining = [o for o in found if not (o.created and first_now)]
        if joining:
            await self._join(unit, spec, send, joining, wanted, now)
        return at_once

    async def _join(
        self,
        unit: UnitOfWork,
        spec: Digest,
        send: ChannelSend,
        joining: list[repo.Opened],
        wanted: dict[str, list[str]],
        now: datetime,
    ) -> None:
        """The notification's item in each digest, counted; a digest due at once when it
        is full, a window after this item when it slides."""
        items = [repo.Item(o.id, o.item_count + 1, wanted[o.user]) for o in joining]
        added = await repo.add_items(unit.session, send.id, item_of(send.notification), items)
        if not added:
            return
        sliding = spec.mode == "sliding" and spec.at is None
        await repo.counted(
            unit.session,
            sorted(added),
            now,
            max_items=spec.max_items,
            slide_s=spec.window_s if sliding else None,
            cap_s=spec.window_s * SLIDING_CAP,
        )


def delivery_id(digest: DigestRow, channel: str, subscription: str = "") -> str:
    """The outbox id of a digest's delivery on a channel (and subscription): a ULID of
    its opening whose random part hashes the rest, the same on every try."""
    created_ms = int(digest.opened_at.timestamp() * 1000)
    key = "\x00".join((digest.tenant, digest.id, channel, subscription)).encode()
    return str(ULID.from_bytes(created_ms.to_bytes(6, "big") + hashlib.sha256(key).digest()[:10]))


SEVERITIES = list(Severity)
"""Severities, the mildest first: a digest is as severe as its worst item."""


def summary(digest: DigestRow, shown: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a digest's templates get: `digest` (`key`, `count`, `items` the latest
    first, `actors`) and a `notification` summarising it, so an e-mail definition's
    templates over `notification` show the digest as they are."""
    latest = shown[0]
    count = len(shown)
    lines = [f"- {entry.get('title', '')}" for entry in shown[:SHOWN_LINES]]
    if count > SHOWN_LINES:
        lines.append(f"... and {count - SHOWN_LINES} more")
    named = {entry.get("severity", Severity.INFO) for entry in shown}
    worst = max((Severity(value) for value in named), key=SEVERITIES.index)
    notification = {
        "id": digest.id,
        "tenant": digest.tenant,
        "title": f"{count} new: {latest.get('title', '')}"[:200],
        "body": "\n".join(lines),
        "severity": worst.value,
        "category": latest.get("category"),
        "action_url": latest.get("action_url"),
        "thread_key": f"digest:{digest.key}",
        "created_at": digest.opened_at.isoformat(),
    }
    digest_fields = {"key": digest.key, "count": count, "items": shown, "actors": _actors(shown)}
    return {"notification": notification, "digest": digest_fields}


def _actors(shown: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each item's actor once (by id), the latest first."""
    by_id: dict[Any, dict[str, Any]] = {}
    for entry in shown:
        actor = entry.get("actor")
        if actor:
            by_id.setdefault(actor.get("id"), actor)
    return list(by_id.values())


class DigestSender:
    """Sends due digests: one delivery per channel (and browser), closing each digest in
    the same transaction."""

    def __init__(self, sender: Kicker | None = None, clock: Clock = utcnow) -> None:
        self._sender = sender
        self._clock = clock

    async def send_due(self, unit: UnitOfWork) -> tuple[int, int]:
        """Up to BATCH due digests no other worker holds, sent and closed in `unit`:
        (digests closed, deliveries added)."""
        session = unit.session
        now = self._clock()
        due = await repo.claim_due(session, now, BATCH)
        if not due:
            return 0, 0
        items = await repo.items_of(session, [d.id for d in due])
        full = [d for d in due if items[d.id].items]
        by_tenant: dict[str, list[DigestRow]] = {}
        for digest in full:
            by_tenant.setdefault(digest.tenant, []).append(digest)
        added = 0
        for tenant, digests in by_tenant.items():
            added += await self._deliver(unit, tenant, digests, items)
        await repo.close(session, [d.id for d in full], repo.SENT, now)
        await repo.close(session, [d.id for d in due if not items[d.id].items], repo.EMPTY, now)
        return len(due), added

    async def _deliver(
        self,
        unit: UnitOfWork,
        tenant: str,
        digests: list[DigestRow],
        items: dict[str, repo.Gathered],
    ) -> int:
        """One tenant's digests' e-mails and pushes, each on the channels its items were
        taken on: the addresses, subscriptions and definitions read once for them all."""
        wanted = {
            channel: [d for d in digests if channel in items[d.id].channels]
            for channel in (EMAIL, PUSH)
        }
        payloads = {d.id: summary(d, items[d.id].items) for d in digests}
        added = 0
        if wanted[EMAIL]:
            added += await self._emails(unit, tenant, wanted[EMAIL], payloads)
        if wanted[PUSH]:
            added += await self._pushes(unit, tenant, wanted[PUSH], payloads)
        return added

    async def _emails(
        self,
        unit: UnitOfWork,
        tenant: str,
        digests: list[DigestRow],
        payloads: dict[str, dict[str, Any]],
    ) -> int:
        """One e-mail per digest whose user has an address, if the tenant can e-mail."""
        session = unit.session
        addresses = await profiles.emails_of(session, tenant, [d.user_id for d in digests])
        if not addresses:
            return 0
        if not _usable(await ensure_definition(session, tenant, EMAIL), "email"):
            return 0
        rows: list[Row] = []
        for d in digests:
            if d.user_id in addresses:
                payload = {**payloads[d.id], "to": addresses[d.user_id], "user": d.user_id}
                title = payload["notification"]["title"]
                text = f"digest e-mail to {d.user_id}: {title}"[:1000]
                rows.append((delivery_id(d, EMAIL), payload, text))
        return await self._add(unit, tenant, EMAIL_DEFINITION, rows)

    async def _pushes(
        self,
        unit: UnitOfWork,
        tenant: str,
        digests: list[DigestRow],
        payloads: dict[str, dict[str, Any]],
    ) -> int:
        """One push per browser each digest's user subscribed, if the tenant can push."""
        session = unit.session
        found = await push_subscriptions.of_users(session, tenant, [d.user_id for d in digests])
        if not any(found.values()):
            return 0
        if not _usable(await ensure_definition(session, tenant, PUSH), "webpush"):
            return 0
        rows: list[Row] = [
            (
                delivery_id(d, PUSH, s.id),
                {**_push(s.id, payloads[d.id]["notification"]), "user": d.user_id},
                f"digest push to {d.user_id}"[:1000],
            )
            for d in digests
            for s in found.get(d.user_id) or []
        ]
        return await self._add(unit, tenant, PUSH_DEFINITION, rows)

    async def _add(self, unit: UnitOfWork, tenant: str, definition: str, rows: list[Row]) -> int:
        return await enqueue_many_once(unit, definition, rows, tenant=tenant, sender=self._sender)


def _push(subscription_id: str, notification: dict[str, Any]) -> dict[str, Any]:
    """A digest's push: the summary as a push shows it."""
    severity = Severity(notification["severity"])
    return webpush_payload(
        subscription_id,
        pushed_notification(notification),
        ttl_s=PUSH_TTL_S,
        urgency=URGENCY[severity],  # type: ignore[arg-type]
        topic=push_topic(notification),
    )


def _usable(definition: DeliveryDefinition | None, kind: str) -> bool:
    """Whether the tenant's definition sends this channel: of its kind, enabled."""
    return definition is not None and definition.kind == kind and definition.disabled_at is None


async def pending(unit: UnitOfWork, tenant: str, user: str) -> list[DigestRow]:
    """`tenant`'s user's digests not sent yet (the console's open digests)."""
    return await repo.pending_of(unit.session, tenant, user)


async def cancel(unit: UnitOfWork, tenant: str, user: str, digest_id: str, by: str) -> None:
    """`tenant`'s user's pending digest, cancelled by `by` (an admin key): its items are
    never sent. NotFound when there is none such (sent, cancelled, or another's)."""
    if await repo.cancel(unit.session, tenant, user, digest_id, by, utcnow()) is None:
        raise NotFound("no such open digest")
