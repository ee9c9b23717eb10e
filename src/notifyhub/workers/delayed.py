"""Delayed-queue workers: the mover, the transition-log flusher, the consumer that
publishes scheduled notifications when they fall due, and the retention sweep."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.unit import UnitOfWork, Units
from notifyhub.errors import InvalidInput
from notifyhub.metrics import Metrics
from notifyhub.services.delayed import DelayedService, Reserved
from notifyhub.services.inbox import InboxService
from notifyhub.services.ingest import SCHEDULED_QUEUE, IngestService
from notifyhub.services.snooze import SNOOZE_QUEUE, WakeUp
from notifyhub.settings import DelayedSettings
from notifyhub.store.delayed import Moved
from notifyhub.store.keys import Queue
from notifyhub.tracing import Attributes, Tracing
from notifyhub.workers.runner import Loop

log = logging.getLogger(__name__)

SCHEDULED_BATCH = 50
Handle = Callable[[Queue, Reserved], Awaitable[None]]
WAKE_MARGIN_S = 0.001
"""Past a due instant, so Redis' millisecond clock has reached it."""
BACKLOG_PAUSE_S = 1.0
"""The retention sweep's pause after a full batch (as the outbox archives: one a second)."""


class ScheduledNotifications:
    """Consumes the internal queues of every tenant: `notifyhub.scheduled` (publish) and
    `notifyhub.snoozed` (resurface a snoozed copy), then acks (unacked ones come back
    after ttl)."""

    def __init__(
        self,
        delayed: DelayedService,
        ingest: IngestService,
        sessionmaker: async_sessionmaker[AsyncSession],
        tracing: Tracing | None = None,
        *,
        inbox: InboxService | None = None,
    ) -> None:
        self._delayed = delayed
        self._ingest = ingest
        self._sessionmaker = sessionmaker
        self._tracing = tracing or Tracing()
        self._inbox = inbox
        handle = self._traced_publish if self._tracing.enabled else self._publish
        self._queues: list[tuple[str, Handle]] = [(SCHEDULED_QUEUE, handle)]
        """Each internal queue and what handles one of its messages (then it is acked)."""
        if inbox is not None:
            self._queues.append((SNOOZE_QUEUE, self._wake))

    async def run_once(self) -> int:
        """A batch from each tenant with a scheduled notification or a wake-up ready (one
        tenant's burst does not hold the others' back by more than a batch)."""
        handled = 0
        for name, handle in self._queues:
            for queue in await self._delayed.ready_queues(name):
                messages = await self._delayed.consume(queue, 0, SCHEDULED_BATCH)
                for message in messages:
                    await handle(queue, message)
                    async with UnitOfWork(self._sessionmaker) as unit:
                        await self._delayed.ack(unit, queue, message.message.id, message.receipt)
                handled += len(messages)
        return handled

    async def _wake(self, queue: Queue, reserved: Reserved) -> None:
        """Resurface the copy a snooze's wake-up names (a wake-up for a snooze changed
        since does nothing)."""
        assert self._inbox is not None  # only registered with an inbox
        wake_up = WakeUp.from_json(reserved.message.body)
        await self._inbox.resurface(queue.tenant, wake_up.user, wake_up.id, wake_up.until_ms)

    async def _traced_publish(self, queue: Queue, reserved: Reserved) -> None:
        """`_publish` as a `notifyhub.scheduled.publish` span (its publish a child)."""
        attributes: Attributes = {
            "notifyhub.tenant": queue.tenant,
            "notifyhub.message.id": reserved.message.id,
        }
        with self._tracing.span("notifyhub.scheduled.publish", attributes, kind="consumer"):
            await self._publish(queue, reserved)

    async def _publish(self, queue: Queue, reserved: Reserved) -> None:
        try:
            async with UnitOfWork(self._sessionmaker) as unit:
                session = unit.session
                await self._ingest.publish_scheduled(session, reserved)
        except InvalidInput as exc:
            # Permanent (its group or topic is gone, it expired before its time): a retry
            # would fail the same way forever and stall the batch behind it. Drop it, loudly.
            log.warning("scheduled notification %s dropped: %s", reserved.message.id, exc.detail)


class MoverPlan:
    """When this process's delayed mover passes next.

    Made before the queue's service, which tells it (`queued`) the due time of what this
    process queued; the mover's loop sleeps `pause_s()` or until `nudge` is set."""

    def __init__(self, settings: DelayedSettings) -> None:
        self._settings = settings
        self.next_pass = math.inf
        """`time.monotonic()` of the next pass; not planned (inf) while a pass runs, so
        anything queued meanwhile wakes the next one."""
        self.nudge = asyncio.Event()

    def queued(self, due_ms: int) -> None:
        """Something this process queued falls due before the planned pass: pass now,
        unless that pass is at most a tick away anyway (a stream of pushes due at once
        would otherwise cost a pass each)."""
        now = time.monotonic()
        due_at = now + (due_ms - time.time() * 1000) / 1000
        if due_at < self.next_pass and self.next_pass - now > self._settings.mover_interval_s:
            self.nudge.set()

    def begin_pass(self) -> None:
        self.next_pass = math.inf  # a push during this pass may come after its set was read

    def after_pass(self, results: list[Moved]) -> None:
        """After a pass: the next at the tick while messages move, else at the earliest
        due instant seen (a burst due at one instant does not wait up to a tick), at most
        `mover_idle_s` away. An idle hub then makes a few passes a second, not one per
        tick (each costs a round trip per set)."""
        now = time.monotonic()
        if any(r.moved for r in results):
            self.next_pass = now + self._settings.mover_interval_s
            return
        due = [r.next_due_at + WAKE_MARGIN_S for r in results if r.next_due_at is not None]
        self.next_pass = min([now + self._settings.mover_idle_s, *due])

    def pause_s(self) -> float:
        """Until the planned pass; mid-pass (unplanned) at most `mover_idle_s`, so that
        `/readyz` still finds a pass that hangs."""
        return min(max(self.next_pass - time.monotonic(), 0.0), self._settings.mover_idle_s)


class DelayedMover:
    """Moves due messages to their ready lists, one pass whenever `plan` says one is due.

    `run_once` is one pass (tests drive it through the runner's `step()` instead of
    waiting for the loop); `loop` runs it when the plan says, or when nudged."""

    def __init__(
        self,
        delayed: DelayedService,
        plan: MoverPlan,
        settings: DelayedSettings,
        metrics: Metrics,
        on_scheduled_ready: Callable[[], None],
        tracing: Tracing | None = None,
    ) -> None:
        self._delayed = delayed
        self._tracing = tracing or Tracing()
        self._plan = plan
        self._settings = settings
        self._metrics = metrics
        self._on_scheduled_ready = on_scheduled_ready
        """Told when a pass made a scheduled notification ready (or re-offered one)."""
        self.loop = Loop(
            "delayed-mover",
            settings.mover_interval_s,
            self.run_once,
            metrics,
            pause_s=plan.pause_s,
            nudge=plan.nudge,
        )

    async def run_once(self) -> list[Moved]:
        """One pass over every set; then plan the next. Tracing on, a pass that moved
        messages is a `notifyhub.delayed.move` span (an idle pass, several a second, none)."""
        self._plan.begin_pass()
        started_ns = time.time_ns() if self._tracing.enabled else 0
        results = await self._delayed.move(self._settings.move_batch)
        if started_ns:
            self._trace(results, started_ns)
        internal = (SCHEDULED_QUEUE, SNOOZE_QUEUE)
        if any(r.queue.name in internal and (r.moved or r.reoffered) for r in results):
            self._on_scheduled_ready()
        self._observe(results)
        self._plan.after_pass(results)
        return results

    def _trace(self, results: list[Moved], started_ns: int) -> None:
        moved = sum(len(r.moved) for r in results)
        if moved:
            attributes: Attributes = {"notifyhub.moved": moved, "notifyhub.queues": len(results)}
            self._tracing.record("notifyhub.delayed.move", started_ns, attributes)

    def _observe(self, results: list[Moved]) -> None:
        backlog: dict[int, int] = {}
        for r in results:
            backlog[r.set_index] = backlog.get(r.set_index, 0) + r.backlog
        oldest_ms = max((r.oldest_due_age_ms for r in results), default=-1)
        moved = sum(len(r.moved) for r in results)
        self._metrics.observe_delayed(backlog, max(oldest_ms, 0) / 1000, moved)


class DelayedRetention:
    """Removes finished messages `retention_s` after they finished, from Redis and
    PostgreSQL (`DelayedService.forget_finished`): one batch, one transaction per pass.

    No lock: the batch's rows are claimed `FOR UPDATE SKIP LOCKED` and the Redis step is
    idempotent, so every hub may run it. After a full batch the next pass comes after
    `BACKLOG_PAUSE_S` (a backlog, such as the first pass after an upgrade finds, goes
    batch by batch without holding PostgreSQL busy); otherwise after
    `retention_interval_s`."""

    def __init__(
        self,
        delayed: DelayedService,
        units: Units,
        settings: DelayedSettings,
        metrics: Metrics,
    ) -> None:
        self._delayed = delayed
        self._units = units
        self._settings = settings
        self._metrics = metrics
        self._full = False
        self.loop = Loop(
            "delayed-retention",
            settings.retention_interval_s,
            self.run_once,
            metrics,
            pause_s=self.pause_s,
        )

    async def run_once(self) -> int:
        """One batch of at most `retention_batch`; the number removed (0 when
        `retention_s` is 0: kept forever)."""
        if not self._settings.retention_s:
            return 0
        async with self._units() as unit:
            removed = await self._delayed.forget_finished(
                unit.session, self._settings.retention_s, self._settings.retention_batch
            )
        self._full = removed >= self._settings.retention_batch
        self._metrics.delayed_removed_total.inc(removed)
        return removed

    def pause_s(self) -> float:
        interval_s = self._settings.retention_interval_s
        return min(BACKLOG_PAUSE_S, interval_s) if self._full else interval_s


def delayed_loops(
    delayed: DelayedService,
    scheduled: ScheduledNotifications,
    plan: MoverPlan,
    settings: DelayedSettings,
    metrics: Metrics,
    units: Units,
    tracing: Tracing | None = None,
) -> list[Loop]:
    # Scheduled notifications are consumed when this process's mover makes one ready
    # (or re-offers one); the slow tick only picks up what another process's mover moved.
    consumer = Loop(
        "scheduled-notifications", settings.scheduled_poll_s, scheduled.run_once, metrics
    )

    mover = DelayedMover(
        delayed, plan, settings, metrics, on_scheduled_ready=consumer.wake, tracing=tracing
    )
    return [
        mover.loop,
        Loop(
            "delayed-log",
            settings.log_flush_interval_s,
            delayed.transitions.flush_unless_held,
            metrics,
        ),
        consumer,
        DelayedRetention(delayed, units, settings, metrics).loop,
    ]
