"""Channels beyond the inbox: a notification's e-mails and Web Pushes.

A publish naming `channels` writes one channel send (db/repositories/channel_sends.py) in
its own transaction; the channel worker (workers/channels.py) expands it here, a chunk of
users per transaction, into outbox deliveries: one e-mail per user with an address, one
Web Push per subscription of the user's browsers, each decided by the user's preference
matrix (category x channel, the tenant's defaults where the user has no row) and
bypassed by severity `critical` (a missing address or subscription still skips). The
deliveries are added by services/channel_rows.py, as digests' and escalation steps' are:
a user in quiet hours gets theirs due when the quiet period ends, not now (`critical` is
never held). Every delivery's id is derived from (notification, user, channel,
subscription), so a chunk expanded twice (a crash after its deliveries, before its
progress) adds nothing twice.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from notifyhub.db.models import ChannelSend
from notifyhub.db.repositories import channel_sends
from notifyhub.db.repositories import preferences as preferences_repo
from notifyhub.db.repositories.preferences import Flags
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.notification import Channel
from notifyhub.services.channel_rows import (
    EMAIL,
    PUSH,
    SKIPPED_PREFERENCE,
    ChannelRows,
    Row,
    is_critical,
    push_fields,
)
from notifyhub.services.webpush_target import webpush_payload

log = logging.getLogger(__name__)

MAX_RETRY_S = 3600.0
"""The longest a send whose chunk failed waits before it is tried again."""

DIGESTED = "digested"
"""A channel's outcome when the notification joined the user's digest (services/digests.py)."""


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


@dataclass(frozen=True, slots=True)
class NotificationMessage:
    """A notification to one user on the channels asked (a channel send's, or an
    escalation step's): the e-mail carries the notification, each push what a browser
    shows of it; the ids derive from `send` (channel_rows.Message)."""

    send: ChannelSend
    user: str
    channels: Mapping[str, bool]
    pushed: Mapping[str, Any]
    """What every push of the notification carries (channel_rows.push_fields)."""

    @property
    def critical(self) -> bool:
        return is_critical(self.send.notification)

    def email(self, to: str) -> Row:
        notification = self.send.notification
        payload = {"to": to, "user": self.user, "notification": notification}
        subject = str(notification.get("title", ""))[:200]
        description = f"e-mail to {self.user}: {subject}"[:1000]
        return delivery_id(self.send, self.user, EMAIL), payload, description

    def push(self, subscription_id: str) -> Row:
        payload = {**webpush_payload(subscription_id, **self.pushed), "user": self.user}
        key = delivery_id(self.send, self.user, PUSH, subscription_id)
        return key, payload, f"push to {self.user}"[:1000]


class Digests(Protocol):
    """Where a send with a `digest` puts its users (services/digests.py `DigestBook`)."""

    async def add(
        self, unit: UnitOfWork, send: ChannelSend, wanted: dict[str, list[str]]
    ) -> list[str]: ...


class ChannelExpander:
    """Expands channel sends into outbox deliveries, one chunk of users per call."""

    def __init__(self, chunk: int, rows: ChannelRows, digests: Digests | None = None) -> None:
        self._chunk = chunk
        self._rows = rows
        """Adds the chunk's deliveries (held in quiet hours, sent at once or later)."""
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
        matrix = await _matrix(unit.session, send, users)
        expansion = Expansion({user: {} for user in users})
        if send.digest and not matrix.critical and self._digests is not None:
            users = await self._digest(self._digests, unit, send, users, matrix, expansion)
        asked = [c for c in (EMAIL, PUSH) if c in send.channels]
        if not asked or not users:
            return expansion
        pushed = push_fields(send.notification, bool(send.push_ttl_named))
        messages = [
            NotificationMessage(send, user, {c: matrix.wants(user, c) for c in asked}, pushed)
            for user in users
        ]
        added = await self._rows.add(unit, send.tenant, messages)
        for user, outcome in zip(users, added.outcomes, strict=True):
            expansion.outcomes[user] |= outcome
        expansion.added = added.added
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


async def _matrix(session: AsyncSession, send: ChannelSend, users: Sequence[str]) -> Matrix:
    """The chunk's preferences for the notification's category (none without one)."""
    critical = is_critical(send.notification)
    category = send.notification.get("category")
    if not category or critical:
        return Matrix({}, None, critical)
    own = await preferences_repo.of_users(session, send.tenant, users, category)
    default = await preferences_repo.default_of(session, send.tenant, category)
    return Matrix(own, default, critical)
