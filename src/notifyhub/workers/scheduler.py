"""Delayed-queue workers: the mover, the transition-log flusher, and the consumer that
delivers scheduled notifications when they fall due."""

from __future__ import annotations

import logging
import math
import time

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.unit import UnitOfWork
from notifyhub.errors import InvalidInput
from notifyhub.metrics import Metrics
from notifyhub.services.delayed import DelayedService, Reserved
from notifyhub.services.ingest import SCHEDULED_TOPIC, IngestService
from notifyhub.settings import DelayedSettings
from notifyhub.store.delayed import Moved
from notifyhub.store.keys import Queue
from notifyhub.workers.runner import Loop

log = logging.getLogger(__name__)

SCHEDULED_BATCH = 50
WAKE_MARGIN_S = 0.001
"""Past a due instant, so Redis' millisecond clock has reached it."""


class ScheduledNotifications:
    """Consumes the internal topic in every tenant's queue of it: deliver, then ack
    (unacked ones come back after ttl)."""

    def __init__(
        self,
        delayed: DelayedService,
        ingest: IngestService,
        sessionmaker: async_sessionmaker[AsyncSession],
    ) -> None:
        self._delayed = delayed
        self._ingest = ingest
        self._sessionmaker = sessionmaker

    async def run_once(self) -> int:
        """A batch from each tenant with a scheduled notification ready (one tenant's
        burst does not hold the others' back by more than a batch)."""
        delivered = 0
        for queue in await self._delayed.ready_queues(SCHEDULED_TOPIC):
            messages = await self._delayed.consume(queue, 0, SCHEDULED_BATCH)
            for message in messages:
                await self._deliver(queue, message)
            delivered += len(messages)
        return delivered

    async def _deliver(self, queue: Queue, reserved: Reserved) -> None:
        message_id = reserved.message.id
        try:
            async with self._sessionmaker.begin() as session:
                await self._ingest.deliver_scheduled(session, reserved)
        except InvalidInput as exc:
            # Permanent (its group or topic is gone, it expired before its time): a retry
            # would fail the same way forever and stall the batch behind it. Drop it, loudly.
            log.warning("scheduled notification %s dropped: %s", message_id, exc.detail)
        async with UnitOfWork(self._sessionmaker) as unit:
            await self._delayed.ack(unit, queue, message_id, reserved.receipt)


def delayed_loops(
    delayed: DelayedService,
    scheduled: ScheduledNotifications,
    settings: DelayedSettings,
    metrics: Metrics,
) -> list[Loop]:
    # Scheduled notifications are consumed when this process's mover makes one ready
    # (or re-offers one); the slow tick only picks up what another process's mover moved.
    consumer = Loop(
        "scheduled-notifications", settings.scheduled_poll_s, scheduled.run_once, metrics
    )

    async def move_pass() -> list[Moved]:
        results = await delayed.move(settings.move_batch)
        if any(r.queue.topic == SCHEDULED_TOPIC and (r.moved or r.reoffered) for r in results):
            consumer.wake()
        backlog: dict[int, int] = {}
        for r in results:
            backlog[r.set_index] = backlog.get(r.set_index, 0) + r.backlog
        oldest_ms = max((r.oldest_due_age_ms for r in results), default=-1)
        moved = sum(len(r.moved) for r in results)
        metrics.observe_delayed(backlog, max(oldest_ms, 0) / 1000, moved)
        return results

    next_pass = math.inf  # not planned: during a pass, anything queued wakes the next

    async def move() -> None:
        """A pass; then plan the next: at the tick while messages move, else at the
        earliest due instant seen (a burst due at one instant does not wait up to a tick),
        at most `mover_idle_s` away. An idle hub then makes a few passes a second, not
        one per tick (each costs a round trip per set)."""
        nonlocal next_pass
        next_pass = math.inf  # a push during this pass may come after its set was read
        results = await move_pass()
        now = time.monotonic()
        if any(r.moved for r in results):
            next_pass = now + settings.mover_interval_s
            return
        due = [r.next_due_at + WAKE_MARGIN_S for r in results if r.next_due_at is not None]
        next_pass = min([now + settings.mover_idle_s, *due])

    def queued(due_ms: int) -> None:
        """Something this process queued falls due before the planned pass: pass now,
        unless that pass is at most a tick away anyway (a stream of pushes due at once
        would otherwise cost a pass each)."""
        now = time.monotonic()
        due_at = now + (due_ms - time.time() * 1000) / 1000
        if due_at < next_pass and next_pass - now > settings.mover_interval_s:
            mover.wake()

    def pause_s() -> float:
        """Until the planned pass; mid-pass (unplanned) at most `mover_idle_s`, so that
        `/readyz` still finds a pass that hangs."""
        return min(max(next_pass - time.monotonic(), 0.0), settings.mover_idle_s)

    mover = Loop("delayed-mover", settings.mover_interval_s, move, metrics, pause_s=pause_s)
    delayed.on_queued = queued
    return [
        mover,
        Loop(
            "delayed-log",
            settings.log_flush_interval_s,
            delayed.transitions.flush_unless_held,
            metrics,
        ),
        consumer,
    ]
