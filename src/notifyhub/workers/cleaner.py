"""The expiry cleaner: drops expired copies of users nobody reads, from the expiry index."""

from __future__ import annotations

import time

from redis.asyncio import Redis

from notifyhub.metrics import Metrics
from notifyhub.settings import WorkerSettings
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import Keys, split_member
from notifyhub.store.lock import RedisLock


class Cleaner:
    """One pass (`run_once`) takes due users from `keys.expiry` and purges each.

    A concurrent ingest may lower a user's index entry just before this pass writes the
    user's next expiry back; at worst the entry is later than needed, which only delays
    reclaiming memory: every read path drops expired items itself.
    """

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        store: InboxStore,
        settings: WorkerSettings,
        metrics: Metrics,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._store = store
        self._settings = settings
        self._metrics = metrics
        self._lock = RedisLock(redis, keys.lock("cleaner"), settings.lock_ttl_ms)

    async def run_once(self) -> int:
        async with self._lock.hold() as held:
            if not held:
                return 0
            purged = await self._pass()
        self._metrics.cleaner_runs_total.inc()
        self._metrics.cleaner_purged_total.inc(purged)
        return purged

    async def _pass(self) -> int:
        now_ms = int(time.time() * 1000)
        due = await self._redis.zrangebyscore(
            self._keys.expiry, "-inf", now_ms, start=0, num=self._settings.cleaner_batch
        )
        purged = 0
        for raw in due:
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            tenant, user = split_member(name)
            count, next_ms = await self._store.purge(tenant, user)
            purged += count
            if next_ms is None:
                await self._redis.zrem(self._keys.expiry, name)
            else:
                await self._redis.zadd(self._keys.expiry, {name: next_ms})
        return purged
