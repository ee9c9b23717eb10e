"""Quiet hours as the hub applies them: a user's own schedule or the tenant's default,
in the user's time zone (their profile's, else the default's, else UTC), read from
PostgreSQL and judged by services/quiet.py at the instant `clock` gives (a controlled
clock in tests). The channel worker holds e-mails and Web Pushes until the end
(services/channels.py); the admin API and the console show it."""

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

from notifyhub.db.repositories import profiles
from notifyhub.db.repositories import quiet as repo
from notifyhub.db.repositories.quiet import Default, Schedule
from notifyhub.db.unit import Units
from notifyhub.services import quiet

log = logging.getLogger(__name__)

STREAM_REFRESH_S = 60.0
"""How old a stream's copy of its user's quiet hours may grow: a schedule changed
reaches open streams within this (plus a read)."""


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


class QuietHours:
    def __init__(self, clock: Callable[[], datetime] = _now) -> None:
        self.clock = clock
        """The instant decisions are made at (tests replace it)."""

    async def held_until(
        self, session: AsyncSession, tenant: str, users: Sequence[str]
    ) -> dict[str, datetime]:
        """Per user of `users` in quiet hours now: when their quiet period ends."""
        own = await repo.of_users(session, tenant, users)
        default = await repo.default_of(session, tenant)
        now = self.clock()
        held = {}
        for user in users:
            found = own.get(user, repo.UserQuiet(None, None))
            schedule, zone = _applying(found.schedule, found.time_zone, default)
            if not schedule:
                continue
            state = quiet.state(quiet.parse(schedule), quiet.zone_of(zone), now)
            if state.until is not None:
                held[user] = state.until
        return held

    async def view(self, session: AsyncSession, tenant: str, user: str) -> UserQuietView:
        """The user's quiet hours as they apply now (the console's user screen)."""
        own = await repo.of_user(session, tenant, user)
        default = await repo.default_of(session, tenant)
        zone = (await profiles.get(session, tenant, user)).time_zone
        schedule, zone = _applying(own, zone, default)
        source = "user" if own is not None else ("tenant" if default is not None else None)
        state = quiet.state(quiet.parse(schedule or {}), quiet.zone_of(zone), self.clock())
        return UserQuietView(schedule, source, str(quiet.zone_of(zone)), state.quiet, state.until)

    async def applying(
        self, session: AsyncSession, tenant: str, user: str
    ) -> tuple[Schedule | None, str | None]:
        """The user's schedule that applies (their own, else the default) and its zone."""
        own = await repo.of_user(session, tenant, user)
        default = await repo.default_of(session, tenant)
        zone = (await profiles.get(session, tenant, user)).time_zone
        return _applying(own, zone, default)


class StreamQuiet:
    """Per process: each streamed user's quiet hours, read from PostgreSQL when their
    first stream opens and again every STREAM_REFRESH_S while one is open, in the
    background (a stream never waits on PostgreSQL; until the first read lands, and
    while PostgreSQL is away, it uses what it knew: at first, not quiet). Entries live
    as long as a stream holds them (a weak map)."""

    def __init__(
        self, hours: QuietHours, units: Units, refresh_s: float = STREAM_REFRESH_S
    ) -> None:
        self._hours, self._units, self._refresh_s = hours, units, refresh_s
        self._entries: weakref.WeakValueDictionary[tuple[str, str], StreamUser] = (
            weakref.WeakValueDictionary()
        )
        self._tasks: set[asyncio.Task[None]] = set()

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
        """Read the entry's schedule again, in the background."""
        entry.loading = True
        task = asyncio.get_running_loop().create_task(self._load(entry))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _load(self, entry: StreamUser) -> None:
        try:
            async with self._units() as unit:
                schedule, zone = await self._hours.applying(unit.session, entry.tenant, entry.user)
            entry.weekly = quiet.parse(schedule or {})
            entry.zone = quiet.zone_of(zone)
        except Exception as exc:  # PostgreSQL away: keep what we knew, try again later
            log.warning("quiet hours of %s/%s not read: %r", entry.tenant, entry.user, exc)
        finally:
            entry.loaded_at = time.monotonic()
            entry.loading = False


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


def _applying(
    own: Schedule | None, zone: str | None, default: Default | None
) -> tuple[Schedule | None, str | None]:
    """The schedule that applies (the user's own, else the default) and its zone (the
    user's, else the default's)."""
    if own is None and default is not None:
        own = default.schedule
    if zone is None and default is not None:
        zone = default.time_zone
    return own, zone
