"""Quiet hours as the hub applies them: a user's own schedule or the tenant's default,
in the user's time zone (their profile's, else the default's, else UTC), read from
PostgreSQL and judged by services/quiet.py at the instant `clock` gives (a controlled
clock in tests). The channel worker holds e-mails and Web Pushes until the end
(services/channels.py); the admin API and the console show it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import profiles
from notifyhub.db.repositories import quiet as repo
from notifyhub.db.repositories.quiet import Default, Schedule
from notifyhub.services import quiet


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
