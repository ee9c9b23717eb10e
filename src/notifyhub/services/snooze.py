"""Snooze wake-ups through the delayed queue: each snooze is a message in the user's
tenant's internal `notifyhub.snoozed` queue, due at the snooze's end, logged in PostgreSQL
like every delayed message (so `notifyhub restore` brings it back after a Redis loss).

A wake-up names the snooze it ends (`until_ms`): one scheduled for a snooze that was
changed, ended early or deleted since finds nothing to do (lua/resurface.lua). The queue
is consumed by `ScheduledNotifications` (workers/delayed.py), which resurfaces the copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    async def schedule(self, tenant: str, wake_up: WakeUp) -> None:
        """Durable once this returns (queued in Redis after the commit)."""
        new = NewMessage(tenant, SNOOZE_QUEUE, wake_up.to_json(), wake_up.until_ms)
        async with self._units() as unit:
            await self._delayed.push(unit, new)
