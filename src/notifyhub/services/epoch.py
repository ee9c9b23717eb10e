"""The epoch watch: notices Redis losing data and rebuilds what PostgreSQL derives it from."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

from redis.asyncio import Redis
from ulid import ULID

from notifyhub.db.unit import Units
from notifyhub.metrics import Metrics
from notifyhub.services import revocations
from notifyhub.services.delayed import DelayedService
from notifyhub.services.durable import DurableInbox
from notifyhub.services.preferences import PreferenceService
from notifyhub.services.topics import TopicService
from notifyhub.store.client import server_identity
from notifyhub.store.keys import Keys

log = logging.getLogger(__name__)


LossSign = Literal["marker_missing", "marker_changed", "restarted"]


class EpochWatch:
    """A loop step noticing, without a hub restart, that Redis lost data, and rebuilding.

    Three signs: the epoch marker is gone (FLUSHALL, a restart without persistence), its
    value changed (another process or `notifyhub restore` rebuilt after a loss: nothing
    left to rebuild here, but this process's streams must hear of it), or the server's
    `run_id` changed (any restart: even with AOF everysec the last second of writes may be
    gone, so the delayed queue is re-queued from PostgreSQL; re-queueing is idempotent).
    The run id and marker are remembered only after a rebuild succeeded, so a failed
    rebuild is retried on the next tick.

    On a loss `on_loss` is told once (the hub makes every local stream re-read: a stream
    whose user's seq is now of another epoch, or below its cursor, sends a `reset`),
    before the rebuild, which may take a while or fail while PostgreSQL is down.

    A worker: each rebuild step reads PostgreSQL in a transaction of its own."""

    def __init__(
        self,
        redis: Redis,
        units: Units,
        keys: Keys,
        topics: TopicService,
        preferences: PreferenceService,
        delayed: DelayedService,
        inboxes: DurableInbox | None = None,
        *,
        metrics: Metrics | None = None,
        on_loss: Callable[[], None] | None = None,
    ) -> None:
        self._redis = redis
        self._units = units
        self._inboxes = inboxes
        self._keys = keys
        self._topics = topics
        self._preferences = preferences
        self._delayed = delayed
        self._metrics = metrics
        self._on_loss = on_loss
        self._run_id: str | None = None
        self._marker: bytes | str | None = None
        self._pending: LossSign | None = None
        """The sign of a loss whose rebuild has not succeeded yet."""
        self.rebuilds = 0

    async def warm(self) -> None:
        """At start-up: topic caches always; the rest when the epoch marker says Redis
        lost its data.

        Failures are logged, not fatal: a missing topic cache is refilled from PostgreSQL
        on first use, /readyz reports a dependency that is down, and `check` retries."""
        try:
            count = await self._rebuild_topics()
            if not await self._redis.exists(self._keys.epoch):
                await self._rebuild_derived()
            self._marker = await self._redis.get(self._keys.epoch)
            log.info("topic cache rebuilt: %d topics", count)
        except Exception:
            log.exception("could not rebuild Redis state from PostgreSQL at start-up")

    async def holds_data(self) -> bool:
        """Redis holds its epoch marker: False after it lost its data (a FLUSHALL, a
        restart without persistence) until the rebuild from PostgreSQL set the marker
        again; meanwhile lists may lack what the rebuild has not replayed yet (`/readyz`)."""
        return bool(await self._redis.exists(self._keys.epoch))

    async def check(self) -> bool:
        """One tick; True when Redis lost data (and it rebuilt, where needed)."""
        run_id = await server_identity(self._redis)
        marker = await self._redis.get(self._keys.epoch)
        sign = self._pending or self._sign(run_id, marker)
        if sign is None:
            self._run_id, self._marker = run_id, marker
            return False
        if self._pending is None:
            self._pending = sign
            self._detected(sign)
        if sign != "marker_changed":
            await self.rebuild()
        self._pending = None
        self._run_id, self._marker = run_id, await self._redis.get(self._keys.epoch)
        return True

    def _sign(self, run_id: str, marker: bytes | str | None) -> LossSign | None:
        if marker is None:
            return "marker_missing"
        if self._run_id is not None and run_id != self._run_id:
            return "restarted"
        if self._marker is not None and marker != self._marker:
            return "marker_changed"
        return None

    def _detected(self, sign: LossSign) -> None:
        log.warning("Redis lost data (%s): streams re-check their cursors", sign)
        if self._metrics is not None:
            self._metrics.redis_data_loss_total.labels(sign=sign).inc()
        if self._on_loss is not None:
            self._on_loss()

    async def rebuild(self) -> None:
        """Everything Redis holds that PostgreSQL can give back (`notifyhub restore`)."""
        try:
            await self._rebuild_topics()
            await self._rebuild_derived()
        except Exception:
            self._count_rebuild("error")
            raise
        self._count_rebuild("ok")
        self.rebuilds += 1

    def _count_rebuild(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.redis_rebuilds_total.labels(outcome=outcome).inc()

    async def _rebuild_topics(self) -> int:
        async with self._units() as unit:
            session = unit.session
            return await self._topics.rebuild_cache(session)

    async def _rebuild_derived(self) -> None:
        """Preferences, the delayed queue, users' token revocations and (durable inbox
        mode) every inbox from PostgreSQL, then the marker (idempotent)."""
        async with self._units() as unit:
            session = unit.session
            users = await self._preferences.rebuild_cache(session)
        async with self._units() as unit:
            session = unit.session
            messages = await self._delayed.restore(session, expired=True)
        async with self._units() as unit:
            session = unit.session
            await revocations.rebuild_cache(session, self._redis, self._keys)
        if self._inboxes is not None:
            await self._inboxes.rebuild()
        await self._redis.set(self._keys.epoch, str(ULID()), nx=True)
        log.info(
            "Redis epoch marker was missing or Redis restarted: rebuilt preferences of %d "
            "users, re-queued %d delayed messages",
            users,
            messages,
        )
