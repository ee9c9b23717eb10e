"""The expiry cleaner: removes expired copies from Redis, driven by the expiry index."""

from __future__ import annotations

from redis.asyncio import Redis

from notifyhub.metrics import Metrics
from notifyhub.settings import WorkerSettings
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import Keys, split_member
from notifyhub.store.lock import RedisLock


class Cleaner:
    """One pass (`run_once`) purges the users whose earliest expiry in `keys.expiry` is due.

    This is the only place expired copies leave Redis: no keyspace SCAN, no keyspace
    notifications. Reads never wait for it, since every read path drops expired items
    itself; the cleaner only reclaims memory of inboxes nobody reads.

    Race with a concurrent ingest, which writes the copy first and then `ZADD LT`s the
    user's entry. While an entry is due its score is in the past, so that ZADD changes
    nothing; a copy written after our purge is then missing from the `next_ms` we write
    back, and at worst the entry is later than needed (reads still hide the item). When
    the purge left the inbox empty we remove the entry and purge once more: a copy that
    arrived meanwhile is either seen by that second purge or its ZADD comes after our
    ZREM and re-adds the entry, so no copy is left out of the index.
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
        """Purge up to `cleaner_batch` due users; the number of copies removed.

        Returns 0 at once while another process holds the cleaner's lock.
        """
        async with self._lock.hold() as held:
            if not held:
                return 0
            purged = 0
            for member in await self._due():
                purged += await self._clean(member)
        self._metrics.cleaner_runs_total.inc()
        self._metrics.cleaner_purged_total.inc(purged)
        return purged

    async def _due(self) -> list[str]:
        # Redis's clock, the one the purge script judges expiry by.
        seconds, micros = await self._redis.time()
        now_ms = seconds * 1000 + micros // 1000
        due = await self._redis.zrangebyscore(
            self._keys.expiry, "-inf", now_ms, start=0, num=self._settings.cleaner_batch
        )
        return [raw.decode() if isinstance(raw, bytes) else str(raw) for raw in due]

    async def _clean(self, member: str) -> int:
        tenant, user = split_member(member)
        purged, next_ms = await self._store.purge(tenant, user)
        if next_ms is not None:
            await self._redis.zadd(self._keys.expiry, {member: next_ms})
            return purged
        await self._redis.zrem(self._keys.expiry, member)
        late, next_ms = await self._store.purge(tenant, user)
        if next_ms is not None:
            await self._redis.zadd(self._keys.expiry, {member: next_ms}, lt=True)
        return purged + late
