"""Builder for the delayed queue: its store, service, transition log and mover plan, and
its loops (mover, log flusher, scheduled consumer, retention sweep)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

from notifyhub.db.unit import Units, units
from notifyhub.features.clients import Database, RedisClients
from notifyhub.metrics import Metrics
from notifyhub.services.delayed import DelayedService, TransitionLog
from notifyhub.settings import Settings
from notifyhub.store.delayed import DelayedStore
from notifyhub.tracing import Tracing
from notifyhub.workers.delayed import MoverPlan, ScheduledNotifications, delayed_loops
from notifyhub.workers.runner import Loop


@dataclass(frozen=True, slots=True)
class DelayedQueue:
    service: DelayedService
    plan: MoverPlan
    """When this process's mover passes next (what it queues wakes the mover)."""
    units: Units
    """Transactions of the queue's own loops (the transition log, the retention sweep)."""


def delayed_queue(
    stack: AsyncExitStack,
    settings: Settings,
    clients: RedisClients,
    database: Database,
    tracing: Tracing | None = None,
) -> DelayedQueue:
    """The queue; transitions still buffered are written when the stack closes."""
    plan = MoverPlan(settings.delayed)
    own_units = units(database.sessionmaker)
    transitions = TransitionLog(own_units)
    stack.push_async_callback(transitions.flush)
    store = DelayedStore(clients.redis, clients.keys, settings.delayed.sets)
    service = DelayedService(store, transitions, on_queued=plan.queued, tracing=tracing)
    return DelayedQueue(service, plan, own_units)


def mover_loops(
    queue: DelayedQueue,
    scheduled: ScheduledNotifications,
    settings: Settings,
    metrics: Metrics,
    tracing: Tracing | None = None,
) -> list[Loop]:
    """The mover, the transition-log flusher, the scheduled-notification consumer (which
    needs ingest, itself made with the queue: hence a step of its own) and the retention
    sweep."""
    return delayed_loops(
        queue.service,
        scheduled,
        queue.plan,
        settings.delayed,
        metrics,
        queue.units,
        tracing or Tracing(),
    )
