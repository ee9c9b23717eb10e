"""Channels beyond the inbox: a notification's e-mails and Web Pushes.

A publish naming `channels` writes one channel send (db/repositories/channel_sends.py) in
its own transaction; the channel worker (workers/channels.py) expands it here, a chunk of
users per transaction, into outbox deliveries: one e-mail per user with an address, one
Web Push per subscription of the user's browsers, each decided by the user's preference
matrix (category x channel, the tenant's defaults where the user has no row) and
bypassed by severity `critical` (a missing address or subscription still skips). A user
in quiet hours (services/quiet_hours.py) gets theirs due when the quiet period ends, not
now (the outbox sends them then; `critical` is never held). Every
delivery's id is derived from (notification, user, channel, subscription), so a chunk
expanded twice (a crash after its deliveries, before its progress) adds nothing twice.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson
from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from notifyhub.db.models import ChannelSend, DeliveryDefinition
from notifyhub.db.repositories import channel_sends, profiles, push_subscriptions
from notifyhub.db.repositories import deliveries as deliveries_repo
from notifyhub.db.repositories import preferences as preferences_repo
from notifyhub.db.repositories.preferences import Flags
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.delivery import AlertTrigger
from notifyhub.domain.notification import Channel, Severity
from notifyhub.services import signing
from notifyhub.services.deliveries import Kicker, enqueue_many_once
from notifyhub.services.quiet_hours import QuietHours
from notifyhub.services.webpush_target import MAX_PLAINTEXT, webpush_payload

log = logging.getLogger(__name__)

EMAIL, PUSH = Channel.EMAIL.value, Channel.PUSH.value
"""The channels' names (plain strings: they key JSON)."""

EMAIL_DEFINITION = "email"
"""The tenant's definition e-mails go through (kind `email`; made on first use)."""
PUSH_DEFINITION = "push"
"""The tenant's definition Web Pushes go through (kind `webpush`; made on first use)."""

DEFAULT_EMAIL: dict[str, Any] = {
    "subject": "{{ notification.title }}",
    "text": "{{ notification.body }}"
    "{% if notification.action_url %}\n\n{{ notification.action_url }}{% endif %}\n",
}
"""The templates of an `email` definition made on first use (over the delivery payload:
`notification`, `user`, `to`)."""

MAX_RETRY_S = 3600.0
"""The longest a send whose chunk failed waits before it is tried again."""
PUSH_TTL_DEFAULT_S = 86_400
"""A push's `TTL` when the notification named no expiry of its own: a day."""
PUSH_TTL_MAX_S = 28 * 86_400
"""The longest `TTL` push services keep a message (28 days)."""
PUSHED_FIELDS = ("id", "tenant", "title", "severity", "category", "action_url", "thread_key")
"""The notification's fields a push carries (and a shortened `body`)."""
PUSH_BODY_CHARS = 300
TOPIC_CHARS = 32
"""Web Push `Topic`: at most 32 base64url characters."""

URGENCY = {
    Severity.CRITICAL: "high",
    Severity.ERROR: "high",
    Severity.WARNING: "normal",
    Severity.INFO: "low",
    Severity.SUCCESS: "low",
}
"""Web Push `Urgency` by severity."""

E_MAILED = "e-mailed"
SKIPPED_PREFERENCE = "skipped: preference"
SKIPPED_NO_ADDRESS = "skipped: no address"
SKIPPED_NO_SUBSCRIPTION = "skipped: no subscription"
SKIPPED_NO_DEFINITION = "skipped: no e-mail definition"
SKIPPED_NO_PUSH_DEFINITION = "skipped: no push definition"

DIGESTED = "digested"
"""A channel's outcome when the notification joined the user's digest (services/digests.py)."""

Row = tuple[str, dict[str, Any], str | None]
"""A delivery to add: its id, payload and description."""


def held_for_quiet(outcome: str, until: datetime | None) -> str:
    """The outcome, noting a delivery held for quiet hours until `until` (if any)."""
    if until is None:
        return outcome
    return f"{outcome}, held for quiet hours until {until.isoformat().replace('+00:00', 'Z')}"


def pushed_to(browsers: int) -> str:
    return f"pushed to {browsers} browser{'' if browsers == 1 else 's'}"


def push_ttl_s(expires_at: datetime, now: datetime, named_expiry: bool) -> int:
    """The push's `TTL`: until the notification expires, if it named an expiry, else a
    day; at most 28 days, never negative."""
    if not named_expiry:
        return PUSH_TTL_DEFAULT_S
    left = int((expires_at - now).total_seconds())
    return max(0, min(left, PUSH_TTL_MAX_S))


def push_topic(notification: dict[str, Any]) -> str | None:
    """The push's `Topic` (a newer push with it replaces one still pending): the thread
    or collapse key, hashed to 32 base64url characters; None when it has neither."""
    key = notification.get("thread_key") or notification.get("collapse_key")
    if not key:
        return None
    digest = hashlib.sha256(str(key).encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")[:TOPIC_CHARS]


def delivery_id(send: ChannelSend, user: str, channel: str, subscription: str = "") -> str:
    """The outbox id of one (notification, user, channel, subscription): a ULID of the
    notification's time whose random part hashes the rest, the same on every expansion."""
    created_ms = int(datetime.fromisoformat(send.notification["created_at"]).timestamp() * 1000)
    key = "\x00".join((send.tenant, send.id, user, channel, subscription)).encode()
    return str(ULID.from_bytes(created_ms.to_bytes(6, "big") + hashlib.sha256(key).digest()[:10]))


@dataclass(frozen=True, slots=True)
class Matrix:
    """A chunk's preferences for the notification's category: users' own rows, and the
    tenant's default for users without one."""

    own: dict[str, Flags]
    default: Flags | None
    critical: bool

    def wants(self, user: str, channel: str) -> bool:
        """Whether `user` takes the notification on `channel` (severity `critical`: yes)."""
        if self.critical:
            return True
        flags = self.own.get(user, self.default)
        if flags is None:
            return True
        _inbox, push, email = flags
        return email if channel == Channel.EMAIL else push


@dataclass(slots=True)
class Expansion:
    """One chunk's outcome: per user, what came of each channel; the deliveries added."""

    outcomes: dict[str, dict[str, str]] = field(default_factory=dict)
    added: int = 0
    held: dict[str, datetime] = field(default_factory=dict)
    """Users in quiet hours: when their deliveries are due."""


class Digests(Protocol):
    """Where a send with a `digest` puts its users (services/digests.py `DigestBook`)."""

    async def add(
        self, unit: UnitOfWork, send: ChannelSend, wanted: dict[str, list[str]]
    ) -> list[str]: ...


class ChannelExpander:
    """Expands channel sends into outbox deliveries, one chunk of users per call."""

    def __init__(
        self,
        chunk: int,
        sender: Kicker | None = None,
        quiet: QuietHours | None = None,
        digests: Digests | None = None,
    ) -> None:
        self._chunk = chunk
        self._sender = sender
        """Sends the deliveries at once after the chunk commits (else the dispatcher)."""
        self._quiet = quiet
        """Holds users' deliveries in their quiet hours (None: nobody's are held)."""
        self._digests = digests
        """Takes the users of a send with a `digest` (None: such sends go out one by one)."""

    async def expand_next(
        self, unit: UnitOfWork
    ) -> tuple[ChannelSend, Expansion | None, int] | None:
        """The next chunk of the oldest due send no one else holds, in `unit` (its row
        stays locked until `unit` ends): the send, what came of the chunk and the index
        of its first user; None when no send is due. A chunk that fails is undone (a
        savepoint), logged, and its send postponed (`channel_sends.postpone`): the
        expansion is None, and the sends behind it go on."""
        session = unit.session
        send = await channel_sends.claim_open(session)
        if send is None:
            return None
        start = send.expanded
        users = list(send.users[start : start + self._chunk])
        try:
            async with unit.savepoint():
                expansion = await self.expand(unit, send, users)
                end = start + len(users)
                done = end >= len(send.users)
                await channel_sends.advance(session, send.id, end, done=done)
        except Exception as exc:  # any fault of this send's: logged, it waits, others go on
            failures = await channel_sends.postpone(session, send.id, repr(exc), MAX_RETRY_S)
            log.exception("channel send %s failed (%d in a row); postponed", send.id, failures)
            return send, None, start
        return send, expansion, start

    async def expand(self, unit: UnitOfWork, send: ChannelSend, users: Sequence[str]) -> Expansion:
        """The deliveries of `users` (all of `send`'s tenant), added once each."""
        session = unit.session
        matrix = await _matrix(session, send, users)
        expansion = Expansion({user: {} for user in users})
        if send.digest and not matrix.critical and self._digests is not None:
            users = await self._digest(self._digests, unit, send, users, matrix, expansion)
        if self._quiet is not None and not matrix.critical:
            expansion.held = await self._quiet.held_until(session, send.tenant, users)
        if Channel.EMAIL in send.channels:
            await self._emails(unit, send, users, matrix, expansion)
        if Channel.PUSH in send.channels:
            await self._pushes(unit, send, users, matrix, expansion)
        return expansion

    async def _digest(
        self,
        digests: Digests,
        unit: UnitOfWork,
        send: ChannelSend,
        users: Sequence[str],
        matrix: Matrix,
        expansion: Expansion,
    ) -> list[str]:
        """Users who take any of the send's channels join their digests (their outcome:
        `digested`); the users still to send one by one: those who take none (their
        skips are noted as usual) and those whose digest `first: now` opened."""
        wanted = {u: [c for c in send.channels if matrix.wants(u, c)] for u in users}
        joining = {u: channels for u, channels in wanted.items() if channels}
        at_once = set(await digests.add(unit, send, joining)) if joining else set()
        for user, channels in joining.items():
            if user not in at_once:
                for channel in send.channels:
                    outcome = DIGESTED if channel in channels else SKIPPED_PREFERENCE
                    expansion.outcomes[user][channel] = outcome
        return [u for u in users if u not in joining or u in at_once]

    async def _emails(
        self,
        unit: UnitOfWork,
        send: ChannelSend,
        users: Sequence[str],
        matrix: Matrix,
        expansion: Expansion,
    ) -> None:
        """One e-mail per user who wants it and has an address, in one statement."""
        wanted = [u for u in users if matrix.wants(u, Channel.EMAIL)]
        addresses = await profiles.emails_of(unit.session, send.tenant, wanted) if wanted else {}
        usable = False
        if addresses:
            definition = await ensure_definition(unit.session, send.tenant, Channel.EMAIL)
            usable = _usable(definition, "email")
        subject = str(send.notification.get("title", ""))[:200]
        rows: list[Row] = []
        for user in users:
            if not matrix.wants(user, Channel.EMAIL):
                outcome = SKIPPED_PREFERENCE
            elif user not in addresses:
                outcome = SKIPPED_NO_ADDRESS
            elif not usable:
                outcome = SKIPPED_NO_DEFINITION
            else:
                outcome = held_for_quiet(E_MAILED, expansion.held.get(user))
                payload = {"to": addresses[user], "user": user, "notification": send.notification}
                description = f"e-mail to {user}: {subject}"[:1000]
                rows.append((delivery_id(send, user, EMAIL), payload, description))
            expansion.outcomes[user][EMAIL] = outcome
        expansion.added += await self._add(unit, send, EMAIL_DEFINITION, rows, expansion.held)

    async def _pushes(
        self,
        unit: UnitOfWork,
        send: ChannelSend,
        users: Sequence[str],
        matrix: Matrix,
        expansion: Expansion,
    ) -> None:
        """One push per subscription of each user who wants it, in one statement."""
        session = unit.session
        wanted = [u for u in users if matrix.wants(u, Channel.PUSH)]
        found = await push_subscriptions.of_users(session, send.tenant, wanted) if wanted else {}
        usable = False
        if any(found.values()):
            definition = await ensure_definition(session, send.tenant, Channel.PUSH)
            usable = _usable(definition, "webpush")
        common = _push_fields(send)
        rows: list[Row] = []
        for user in users:
            subscriptions = found.get(user) or []
            if not matrix.wants(user, Channel.PUSH):
                outcome = SKIPPED_PREFERENCE
            elif not subscriptions:
                outcome = SKIPPED_NO_SUBSCRIPTION
            elif not usable:
                outcome = SKIPPED_NO_PUSH_DEFINITION
            else:
                outcome = held_for_quiet(pushed_to(len(subscriptions)), expansion.held.get(user))
                for subscription in subscriptions:
                    payload = {**webpush_payload(subscription.id, **common), "user": user}
                    key = delivery_id(send, user, PUSH, subscription.id)
                    rows.append((key, payload, f"push to {user}"[:1000]))
            expansion.outcomes[user][PUSH] = outcome
        expansion.added += await self._add(unit, send, PUSH_DEFINITION, rows, expansion.held)

    async def _add(
        self,
        unit: UnitOfWork,
        send: ChannelSend,
        definition: str,
        rows: list[Row],
        held: dict[str, datetime],
    ) -> int:
        """The rows' deliveries on `definition`, each once (one already there, from an
        expansion repeated, is not added again), a held user's due when their quiet
        hours end; how many were added."""
        due = {key: held[p["user"]] for key, p, _ in rows if p["user"] in held}
        return await enqueue_many_once(
            unit, definition, rows, tenant=send.tenant, sender=self._sender, due=due
        )


def _usable(definition: DeliveryDefinition | None, kind: str) -> bool:
    """Whether the tenant's definition sends this channel: of its kind, enabled."""
    return definition is not None and definition.kind == kind and definition.disabled_at is None


async def _matrix(session: AsyncSession, send: ChannelSend, users: Sequence[str]) -> Matrix:
    """The chunk's preferences for the notification's category (none without one)."""
    critical = send.notification.get("severity") == Severity.CRITICAL
    category = send.notification.get("category")
    if not category or critical:
        return Matrix({}, None, critical)
    own = await preferences_repo.of_users(session, send.tenant, users, category)
    default = await preferences_repo.default_of(session, send.tenant, category)
    return Matrix(own, default, critical)


def _push_fields(send: ChannelSend) -> dict[str, Any]:
    """What every push of `send` carries: the notification as a push shows it, its TTL,
    urgency and topic (`webpush_payload`'s arguments)."""
    notification = send.notification
    expires_at = datetime.fromisoformat(notification["expires_at"])
    named = bool(send.push_ttl_named)
    severity = Severity(notification.get("severity", Severity.INFO))
    return {
        "notification": pushed_notification(notification),
        "ttl_s": push_ttl_s(expires_at, datetime.now(UTC), named),
        "urgency": URGENCY[severity],
        "topic": push_topic(notification),
    }


def pushed_notification(notification: dict[str, Any]) -> dict[str, Any]:
    """What a push carries of the notification: what a browser shows (its id, title, a
    body of at most PUSH_BODY_CHARS, severity, category, link, thread), not its `data`:
    one encrypted record holds about 4 KB (webpush_target.MAX_PLAINTEXT)."""
    shown = {k: notification.get(k) for k in PUSHED_FIELDS if notification.get(k) is not None}
    body = str(notification.get("body") or "")
    if body:
        shown["body"] = body[:PUSH_BODY_CHARS]
    if len(orjson.dumps(shown)) > MAX_PLAINTEXT:  # a long link: without it, the rest fits
        shown.pop("action_url", None)
    return shown


async def ensure_definition(
    session: AsyncSession, tenant: str, channel: str
) -> DeliveryDefinition | None:
    """The tenant's definition for `channel` (`email` or `push`), made with defaults on
    first use (one the tenant defined is kept as it is, whatever its kind: a caller
    checks it)."""
    name, kind = (
        (EMAIL_DEFINITION, "email") if channel == Channel.EMAIL else (PUSH_DEFINITION, "webpush")
    )
    values: dict[str, Any] = {
        "tenant": tenant,
        "name": name,
        "kind": kind,
        "url": "",
        "email": DEFAULT_EMAIL if kind == "email" else None,
        "timeout_s": 10.0,
        "retry_intervals": "5s,5m,1h,1d",
        "max_retries": 5,
        "alert_trigger": AlertTrigger.FINAL_FAILURE.value,
        "alert_after_n": None,
        "alert_emails": [],
        "alert_webhook_url": None,
        "need_confirm": False,
        "max_confirm_delay_s": 300,
        "secret": signing.new_secret(),
    }
    await deliveries_repo.add_definition_once(session, values)
    return await deliveries_repo.definition(session, tenant, name)
