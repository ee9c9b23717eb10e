"""Digests (issue 41 item 3): a user's e-mails and pushes under one digest key, held in
PostgreSQL until the window closes, then sent as ONE delivery per channel.

Where things live, and why: a notification's digest item is written by the channel worker
in the same transaction as the rest of its chunk (services/channels.py), so it commits
with the chunk's progress or not at all; the digest's due time is a column of its row.
The digest worker (workers/digests.py) takes due digests `FOR UPDATE SKIP LOCKED`, adds
their deliveries to the outbox and closes them in one transaction: two workers never send
one digest twice, and a crash before the commit leaves it due for the next pass. Nothing
about a digest is in Redis, so losing Redis loses no digest (the outbox is the log).

A digest's deliveries are added by services/channel_rows.py, as a notification's are: a
user in quiet hours when their digest closes gets it when the quiet period ends (the
outbox delivery due then), not now.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ulid import ULID

from notifyhub.db.models import ChannelSend
from notifyhub.db.models import Digest as DigestRow
from notifyhub.db.repositories import digests as repo
from notifyhub.db.unit import UnitOfWork, each_alone_on_failure
from notifyhub.domain.digest import SLIDING_CAP, Digest, opening_due, zone
from notifyhub.domain.notification import Severity, to_rfc3339
from notifyhub.errors import NotFound
from notifyhub.services.channel_rows import (
    EMAIL,
    PUSH,
    ChannelRows,
    Row,
    is_critical,
    push_fields,
)
from notifyhub.services.webpush_target import webpush_payload

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
ITEM_FIELDS = ("id", "title", "body", "category", "severity", "action_url", "actor", "created_at")
"""What a digest item keeps of its notification."""
ITEM_BODY_CHARS = 500
SHOWN_LINES = 20
"""How many items a digest's plain-text body lists (all of them are in `digest.items`)."""
BATCH = 500
"""Digests one transaction of the worker sends at most (a few statements each: 500 cost
about a tenth less CPU per digest than 100 when thousands fall due at once)."""
RETRY_S = 60.0
"""How soon a digest that failed to send (logged) is tried again."""


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
        "created_at": to_rfc3339(digest.opened_at),  # as every time the hub writes
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


@dataclass(frozen=True, slots=True)
class DigestMessage:
    """A digest to its user on the channels its items were taken on: the e-mail
    carries the summary (`summary`), each push what a browser shows of the summary's
    notification; the ids derive from the digest (channel_rows.Message)."""

    digest: DigestRow
    summary: dict[str, Any]
    channels: Mapping[str, bool]

    @property
    def user(self) -> str:
        return self.digest.user_id

    @property
    def critical(self) -> bool:
        return is_critical(self.summary["notification"])

    def email(self, to: str) -> Row:
        payload = {**self.summary, "to": to, "user": self.user}
        title = self.summary["notification"]["title"]
        description = f"digest e-mail to {self.user}: {title}"[:1000]
        return delivery_id(self.digest, EMAIL), payload, description

    def push(self, subscription_id: str) -> Row:
        pushed = push_fields(self.summary["notification"], named_expiry=False)
        payload = {**webpush_payload(subscription_id, **pushed), "user": self.user}
        key = delivery_id(self.digest, PUSH, subscription_id)
        return key, payload, f"digest push to {self.user}"[:1000]


@dataclass(frozen=True, slots=True)
class Flushed:
    """One transaction of the digest worker: digests closed, deliveries added, and each
    sent digest's outcome per channel (`e-mailed, held for quiet hours until ...`)."""

    closed: int
    added: int
    outcomes: dict[str, dict[str, str]]


class DigestSender:
    """Sends due digests: one delivery per channel (and browser), closing each digest in
    the same transaction."""

    def __init__(self, rows: ChannelRows, clock: Clock = utcnow) -> None:
        self._rows = rows
        """Adds the deliveries (held in quiet hours, sent at once or later)."""
        self._clock = clock

    async def send_due(self, unit: UnitOfWork) -> Flushed:
        """Up to BATCH due digests no other worker holds, sent and closed in `unit`."""
        session = unit.session
        now = self._clock()
        due = await repo.claim_due(session, now, BATCH)
        if not due:
            return Flushed(0, 0, {})
        items = await repo.items_of(session, [d.id for d in due])
        full = [d for d in due if items[d.id].items]
        by_tenant: dict[str, list[DigestRow]] = {}
        for digest in full:
            by_tenant.setdefault(digest.tenant, []).append(digest)
        added = 0
        outcomes: dict[str, dict[str, str]] = {}
        for tenant, digests in by_tenant.items():
            sent = await self._send(unit, tenant, digests, items)
            added += sent.added
            outcomes |= sent.outcomes
        await repo.close(session, [d.id for d in full if d.id in outcomes], repo.SENT, now)
        await repo.close(session, [d.id for d in due if not items[d.id].items], repo.EMPTY, now)
        return Flushed(len(due), added, outcomes)

    async def _send(
        self,
        unit: UnitOfWork,
        tenant: str,
        digests: list[DigestRow],
        items: Mapping[str, repo.Gathered],
    ) -> Flushed:
        """The deliveries of one tenant's digests (outcomes by digest id). A digest that
        cannot be sent (an item that does not read) holds back only itself
        (`each_alone_on_failure`): logged, taking no more items, and tried again RETRY_S
        later."""

        async def send(batch: Sequence[DigestRow]) -> Flushed:
            messages = [_message(d, items[d.id]) for d in batch]
            sent = await self._rows.add(unit, tenant, messages)
            outcomes = {d.id: outcome for d, outcome in zip(batch, sent.outcomes, strict=True)}
            return Flushed(len(batch), sent.added, outcomes)

        async def failed(digest: DigestRow) -> None:
            log.exception("digest %s not sent; again in %gs", digest.id, RETRY_S)
            later = self._clock() + timedelta(seconds=RETRY_S)
            await repo.postpone(unit.session, digest.id, later)

        parts = await each_alone_on_failure(unit, digests, send, failed)
        outcomes = {k: v for part in parts for k, v in part.outcomes.items()}
        return Flushed(sum(p.closed for p in parts), sum(p.added for p in parts), outcomes)


def _message(digest: DigestRow, gathered: repo.Gathered) -> DigestMessage:
    """The digest's message, on each channel any of its items was taken on."""
    channels = {c: True for c in (EMAIL, PUSH) if c in gathered.channels}
    return DigestMessage(digest, summary(digest, gathered.items), channels)


async def pending(unit: UnitOfWork, tenant: str, user: str) -> list[DigestRow]:
    """`tenant`'s user's digests not sent yet (the console's open digests)."""
    return await repo.pending_of(unit.session, tenant, user)


async def cancel(unit: UnitOfWork, tenant: str, user: str, digest_id: str, by: str) -> None:
    """`tenant`'s user's pending digest, cancelled by `by` (an admin key): its items are
    never sent. NotFound when there is none such (sent, cancelled, or another's)."""
    if await repo.cancel(unit.session, tenant, user, digest_id, by, utcnow()) is None:
        raise NotFound("no such open digest")
