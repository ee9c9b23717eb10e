"""Redis state derived from PostgreSQL, rebuilt at start-up and whenever Redis loses it."""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from ulid import ULID

from notifyhub.services.delayed import DelayedService
from notifyhub.services.durable import DurableInbox
from notifyhub.services.preferences import PreferenceService
from notifyhub.services.topics import TopicService
from notifyhub.store.client import server_identity
from notifyhub.store.keys import Keys

log = logging.getLogger(__name__)


class EpochWatch:
    """A loop step noticing, without a hub restart, that Redis lost data, and rebuilding.

    Two signs: the epoch marker is gone (FLUSHALL, a restart without persistence), or the
    server's `run_id` changed (any restart: even with AOF everysec the last second of
    writes may be gone, so the delayed queue is re-queued from PostgreSQL; re-queueing is
    idempotent). The run id is remembered only after a rebuild succeeded, so a failed
    rebuild is retried on the next tick."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        topics: TopicService,
        preferences: PreferenceService,
        delayed: DelayedService,
        inboxes: DurableInbox | None = None,
    ) -> None:
        self._redis = redis
        self._inboxes = inboxes
        self._keys = keys
        self._topics = topics
        self._preferences = preferences
        self._delayed = delayed
        self._run_id: str | None = None
        self.rebuilds = 0

    async def warm(self) -> None:
        """At start-up: topic caches always; the rest when the epoch marker says Redis
        lost its data.

        Failures are logged, not fatal: a missing topic cache is refilled from PostgreSQL
        on first use, /readyz reports a dependency that is down, and `check` retries."""
        try:
            count = await self._topics.rebuild_cache()
            if not await self._redis.exists(self._keys.epoch):
                await self._rebuild_derived()
            log.info("topic cache rebuilt: %d topics", count)
        except Exception:
            log.exception("could not rebuild caches from PostgreSQL at start-up")

    async def check(self) -> bool:
        """One tick; True when it rebuilt."""
        run_id = await server_identity(self._redis)
        lost = not await self._redis.exists(self._keys.epoch)
        restarted = self._run_id is not None and run_id != self._run_id
        if lost or restarted:
            why = "lost its data" if lost else "restarted"
            log.warning("Redis %s: rebuilding from PostgreSQL", why)
            await self.rebuild()
        self._run_id = run_id
        return lost or restarted

    async def rebuild(self) -> None:
        """Everything Redis holds that PostgreSQL can give back (`notifyhub restore`)."""
        await self._topics.rebuild_cache()
        await self._rebuild_derived()
        self.rebuilds += 1

    async def _rebuild_derived(self) -> None:
        """Preferences, the delayed queue and (durable inbox mode) every inbox from
        PostgreSQL, then the marker (idempotent)."""
        users = await self._preferences.rebuild_cache()
        messages = await self._delayed.restore(expired=True)
        if self._inboxes is not None:
            await self._inboxes.rebuild()
        await self._redis.set(self._keys.epoch, str(ULID()), nx=True)
        log.info(
            "Redis epoch marker was missing or Redis restarted: rebuilt preferences of %d "
            "users, re-queued %d delayed messages",
            users,
            messages,
        )
