"""Snooze wake-ups through the delayed queue: each snooze is a message in the user's
tenant's internal `notifyhub.snoozed` queue, due at the snooze's end, logged in PostgreSQL
like every delayed message (so `notifyhub restore` brings it back after a Redis loss).

A wake-up names the snooze it ends (`until_ms`): one scheduled for a snooze that was
changed, ended early or deleted since finds nothing to do (lua/resurface.lua). Such a
wake-up is removed too, row and all, once the change is made (`forget`: a re-snooze, an
unsnooze, a recall): a copy has one wake-up, its snooze's, and a change refused (a pin
past the limit) leaves none of its own. A deleted copy's stays (a DELETE does not ask
PostgreSQL), as does one left by a crash between the two steps: a no-op at its time,
then removed by the delayed queue's retention like any finished message. The queue is consumed
by `ScheduledNotifications` (workers/delayed.py), which resurfaces the copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import delayed as repo
from notifyhub.db.unit import Units
from notifyhub.services.delayed import DelayedService, NewMessage

SNOOZE_QUEUE = "notifyhub.snoozed"
MAX_SNOOZE_S = 90 * 24 * 3600
"""A snooze ends at most 90 days ahead."""


@dataclass(frozen=True, slots=True)
class WakeUp:
    """One wake-up message's body."""

    user: str
    id: str
    until_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"user": self.user, "id": self.id, "until_ms": self.until_ms}

    @classmethod
    def from_json(cls, body: Any) -> WakeUp:
        return cls(str(body["user"]), str(body["id"]), int(body["until_ms"]))


class Snoozes:
    """Schedules wake-ups in transactions of its own: a PATCH that snoozes writes to
    PostgreSQL; every other PATCH stays Redis-only."""

    def __init__(self, delayed: DelayedService, units: Units) -> None:
        self._delayed = delayed
        self._units = units

    async def schedule(self, tenant: str, wake_up: WakeUp) -> str:
        """Durable once this returns (queued in Redis after the commit); returns its id."""
        new = NewMessage(tenant, SNOOZE_QUEUE, wake_up.to_json(), wake_up.until_ms)
        async with self._units() as unit:
            message_id, _due_at = await self._delayed.push(unit, new)
        return message_id

    async def forget(
        self, tenant: str, user: str, ids: Sequence[str], *, keep: str | None = None
    ) -> int:
        """Remove the wake-ups of the user's copies `ids` but `keep` (the one a snooze just
        scheduled): their snooze changed, ended or went with the copy. Returns how many."""
        async with self._units() as unit:
            return await forget_in(unit.session, self._delayed, tenant, ids, user=user, keep=keep)

    async def unschedule(self, tenant: str, wake_up_id: str) -> None:
        """Remove a wake-up `schedule` made, whose change was then refused."""
        async with self._units() as unit:
            row = await repo.find(unit.session, wake_up_id)
            if row is not None and row.tenant == tenant:
                await self._delayed.discard(unit.session, [row])


async def forget_in(
    session: AsyncSession,
    delayed: DelayedService,
    tenant: str,
    ids: Sequence[str],
    *,
    user: str | None = None,
    keep: str | None = None,
) -> int:
    """`Snoozes.forget` in `session`; without `user`, every user's (a recall)."""
    match = {"user": user} if user is not None else {}
    rows = await repo.unfinished_naming(session, tenant, SNOOZE_QUEUE, ids, match)
    return await delayed.discard(session, rows, keep=keep)
