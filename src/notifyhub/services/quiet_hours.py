"""Quiet hours as the hub applies them: a user's own schedule or the tenant's default,
in the user's time zone (their profile's, else the default's, else UTC), read from
PostgreSQL and judged by services/quiet.py at the instant `clock` gives (a controlled
clock in tests). E-mails and Web Pushes are held until the end where they enter the
outbox (services/channel_rows.py: channel sends, digests, escalation steps); the admin
API and the console show it."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
import zoneinfo
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import quiet as repo
from notifyhub.db.repositories.quiet import Default, Schedule
from notifyhub.db.unit import Units
from notifyhub.services import quiet

log = logging.getLogger(__name__)

STREAM_REFRESH_S = 60.0
"""How old a stream's copy of its user's quiet hours may grow: a schedule changed
reaches open streams within this (plus a read)."""
LOAD_BATCH = 500
"""Streamed users whose quiet hours one background read takes."""
LOAD_WAIT_S = 0.05
"""How long a read waits for more streamed users to join it (not at all when LOAD_BATCH
are waiting). A reconnect storm's streams open a few at a time: read as they came, each
few cost a read (a unit, `applying_of`) of their own."""


_NOBODY = repo.UserQuiet(None, None)
"""A user with neither a schedule of their own nor a zone."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class UserQuietView:
    """A user's quiet hours as they apply now: the schedule, whose it is, the zone, and
    whether they are quiet now and until when."""

    schedule: Schedule | None
    source: str | None
    """`user` (their own), `tenant` (the default) or None (no quiet hours)."""
    time_zone: str
    quiet_now: bool
    until: datetime | None


def weekly_of(tenant: str, user: str, schedule: Schedule | None) -> quiet.Weekly:
    """The schedule that applies to the user, parsed. One that does not parse (stored by
    hand or by an older hub) is no quiet hours, logged as an error: it holds back
    nobody's e-mails and pushes, the user's nor those sent with them."""
    try:
        return quiet.parse(schedule or {})
    except (AttributeError, TypeError, ValueError) as exc:  # InvalidSchedule too
        log.error("quiet hours of %r in tenant %r do not read, ignored: %s", user, tenant, exc)
        return {}


class QuietHours:
    def __init__(self, clock: Callable[[], datetime] = _now) -> None:
        self.clock = clock
        """The instant decisions are made at (tests replace it)."""

    async def held_until(
        self, session: AsyncSession, tenant: str, users: Sequence[str]
    ) -> dict[str, datetime]:
        """Per user of `users` in quiet hours now: when their quiet period ends."""
        found = await applying_of(session, tenant, users)
        now = self.clock()
        held = {}
        for user, (schedule, zone) in found.items():
            if not schedule:
                continue
            state = quiet.state(weekly_of(tenant, user, schedule), quiet.zone_of(zone), now)
            if state.until is not None:
                held[user] = state.until
        return held

    async def view(self, session: AsyncSession, tenant: str, user: str) -> UserQuietView:
        """The user's quiet hours as they apply now (the console's user screen)."""
        found, default = await repo.of_users(session, tenant, [user])
        own = found.get(user, _NOBODY)
        schedule, zone = _applying(own, default)
        source = "user" if own.schedule is not None else ("tenant" if default is not None else None)
        weekly = weekly_of(tenant, user, schedule)
        state = quiet.state(weekly, quiet.zone_of(zone), self.clock())
        return UserQuietView(schedule, source, str(quiet.zone_of(zone)), state.quiet, state.until)


class StreamQuiet:
    """Per process: each streamed user's quiet hours, read from PostgreSQL when their
    first stream opens and again every STREAM_REFRESH_S while one is open, in the
    background (a stream never waits on PostgreSQL; until the first read lands, and
    while PostgreSQL is away, it uses what it knew: at first, not quiet). Entries live
    as long as a stream holds them (a weak map). `close`, at shutdown before the
    database's engine goes, stops the reader: no read starts afterwards."""

    def __init__(
        self, hours: QuietHours, units: Units, refresh_s: float = STREAM_REFRESH_S
    ) -> None:
        self._hours, self._units, self._refresh_s = hours, units, refresh_s
        self._entries: weakref.WeakValueDictionary[tuple[str, str], StreamUser] = (
            weakref.WeakValueDictionary()
        )
        self._pending: list[StreamUser] = []
        self._loader: asyncio.Task[None] | None = None
        self._closed = False

    def flag(self, tenant: str, user: str) -> StreamUser:
        """The user's entry, shared by their streams in this process (read if new)."""
        entry = self._entries.get((tenant, user))
        if entry is None:
            entry = StreamUser(self, tenant, user)
            self._entries[(tenant, user)] = entry
            self.refresh(entry)
        return entry

    def now(self) -> datetime:
        return self._hours.clock()

    def stale(self, entry: StreamUser) -> bool:
        return not entry.loading and time.monotonic() - entry.loaded_at >= self._refresh_s

    def refresh(self, entry: StreamUser) -> None:
        """Read the entry's schedule again, in the background: entries due within
        LOAD_WAIT_S are read together, LOAD_BATCH at a time, one `applying_of` per tenant
        (a reconnect storm costs a few reads, not one per few streams)."""
        if self._closed:
            return
        entry.loading = True
        self._pending.append(entry)
        if self._loader is None or self._loader.done():
            self._loader = asyncio.get_running_loop().create_task(self._load_pending())

    async def close(self) -> None:
        """Stop reading: a read waiting or under way is cancelled, and none starts."""
        self._closed = True
        if self._loader is not None:
            self._loader.cancel()
            await asyncio.gather(self._loader, return_exceptions=True)

    async def _load_pending(self) -> None:
        while self._pending:
            if len(self._pending) < LOAD_BATCH:
                await asyncio.sleep(LOAD_WAIT_S)  # others opening now join this read
            batch, self._pending = self._pending[:LOAD_BATCH], self._pending[LOAD_BATCH:]
            await self._load(batch)

    async def _load(self, batch: list[StreamUser]) -> None:
        try:
            async with self._units() as unit:
                for tenant, entries in _by_tenant(batch).items():
                    users = [entry.user for entry in entries]
                    found = await applying_of(unit.session, tenant, users)
                    for entry in entries:
                        schedule, zone = found[entry.user]
                        entry.weekly = weekly_of(tenant, entry.user, schedule)
                        entry.zone = quiet.zone_of(zone)
        except Exception as exc:  # PostgreSQL away: keep what we knew, try again later
            log.warning("quiet hours of %d streamed users not read: %r", len(batch), exc)
        finally:
            now = time.monotonic()
            for entry in batch:
                entry.loaded_at, entry.loading = now, False


def _by_tenant(entries: list[StreamUser]) -> dict[str, list[StreamUser]]:
    grouped: dict[str, list[StreamUser]] = {}
    for entry in entries:
        grouped.setdefault(entry.tenant, []).append(entry)
    return grouped


async def applying_of(
    session: AsyncSession, tenant: str, users: Sequence[str]
) -> dict[str, tuple[Schedule | None, str | None]]:
    """Per user of `users`: the schedule that applies and its zone (one statement)."""
    own, default = await repo.of_users(session, tenant, users)
    return {user: _applying(own.get(user, _NOBODY), default) for user in users}


class StreamUser:
    """One user's quiet hours as their streams in this process know them."""

    __slots__ = ("__weakref__", "loaded_at", "loading", "owner", "tenant", "user", "weekly", "zone")

    def __init__(self, owner: StreamQuiet, tenant: str, user: str) -> None:
        self.owner, self.tenant, self.user = owner, tenant, user
        self.weekly: quiet.Weekly = {}
        self.zone: zoneinfo.ZoneInfo = quiet.zone_of(None)
        self.loaded_at = 0.0
        self.loading = False

    def quiet(self) -> bool:
        """Whether the user is in quiet hours now (a stale copy is read again, behind)."""
        if self.owner.stale(self):
            self.owner.refresh(self)
        if not self.weekly:
            return False
        return quiet.state(self.weekly, self.zone, self.owner.now()).quiet


def _applying(own: repo.UserQuiet, default: Default | None) -> tuple[Schedule | None, str | None]:
    """The schedule that applies (the user's own, else the default) and its zone (the
    user's, else the default's)."""
    schedule, zone = own.schedule, own.time_zone
    if default is not None:  # (an own `{}` is a schedule: never quiet, whatever the default)
        schedule = default.schedule if schedule is None else schedule
        zone = default.time_zone if zone is None else zone
    return schedule, zone
