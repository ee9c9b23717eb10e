"""Builders for publishing: ingest, routing rules, scheduled notifications and the
periodic producers."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

from notifyhub.db.unit import units
from notifyhub.features.clients import Database, RedisClients
from notifyhub.features.delayed import DelayedQueue
from notifyhub.features.inbox import Durable
from notifyhub.features.routing import Routing
from notifyhub.metrics import Metrics
from notifyhub.services.fanouts import LEASE_MS, RESUME_INTERVAL_S, Fanouts
from notifyhub.services.inbox import InboxService
from notifyhub.services.ingest import IngestService
from notifyhub.services.rules import RuleService
from notifyhub.services.snooze import Snoozes
from notifyhub.services.views import Views
from notifyhub.settings import Settings
from notifyhub.store.fanouts import FanoutRecords
from notifyhub.store.idempotency import IdempotencyStore
from notifyhub.store.inbox import InboxStore
from notifyhub.store.traces import RoutingTraces
from notifyhub.tracing import Tracing
from notifyhub.workers.delayed import ScheduledNotifications
from notifyhub.workers.producers import Producer, load, loops
from notifyhub.workers.runner import Loop


@dataclass(frozen=True, slots=True)
class Publishing:
    ingest: IngestService
    rules: RuleService
    scheduled: ScheduledNotifications
    """Publishes scheduled notifications and resurfaces snoozed copies when the delayed
    queue makes their messages ready."""
    inbox: InboxService
    """Users' own inboxes (snoozes are scheduled on the delayed queue)."""
    views: Views
    """Inbox views (tabs): the tenant's and users' own."""
    routing_traces: RoutingTraces
    """Each publish's routing, per recipient (store/traces/)."""
    fanouts: Fanouts
    """Deferred fan-outs placed after their 202, and resumed when a process stops."""
    loops: tuple[Loop, ...]
    """`fanout-resume`: fan-outs whose process stopped placing them, taken over."""


@dataclass(frozen=True, slots=True)
class Producers:
    producers: tuple[Producer, ...]
    loops: tuple[Loop, ...]


def publishing(
    settings: Settings,
    clients: RedisClients,
    database: Database,
    store: InboxStore,
    routing: Routing,
    delayed: DelayedQueue,
    durable: Durable,
    metrics: Metrics,
    tracing: Tracing | None = None,
) -> Publishing:
    """Nothing to release: the parts live on the clients and the queue."""
    tracing = tracing or Tracing()
    idempotency = IdempotencyStore(clients.redis, clients.keys, settings.idempotency_ttl_s)
    views = Views(store, units(database.sessionmaker), metrics)
    traces = RoutingTraces(
        clients.redis,
        clients.keys,
        ttl_s=settings.routing_trace_ttl_s,
        users=settings.routing_trace_users,
        bulk=clients.bulk,
    )
    records = FanoutRecords(clients.redis, clients.keys, lease_ms=LEASE_MS)
    fanouts = Fanouts(store, records, settings.limits, metrics, views, traces)
    ingest = IngestService(
        store,
        idempotency,
        routing.topics,
        delayed.service,
        settings,
        metrics,
        durable=durable.log,
        tracing=tracing,
        views=views,
        routing=traces,
        fanouts=fanouts,
    )
    snoozes = Snoozes(delayed.service, units(database.sessionmaker))
    inbox = InboxService(store, durable.log, snoozes, views)
    scheduled = ScheduledNotifications(
        delayed.service, ingest, database.sessionmaker, tracing, inbox=inbox
    )
    rules = RuleService(ingest, metrics)
    loops = (Loop("fanout-resume", RESUME_INTERVAL_S, fanouts.resume_once, metrics),)
    return Publishing(ingest, rules, scheduled, inbox, views, traces, fanouts, loops)


def producers(
    stack: AsyncExitStack,
    settings: Settings,
    clients: RedisClients,
    database: Database,
    ingest: IngestService,
    metrics: Metrics,
) -> Producers:
    """The producers of `producers_file` (an invalid file fails the start-up) and their
    loops; each one's own engine is disposed when the stack closes."""
    if settings.producers_file is None:
        return Producers((), ())
    made = tuple(
        Producer(
            config,
            ingest=ingest,
            sessionmaker=database.sessionmaker,
            redis=clients.redis,
            keys=clients.keys,
            lock_ttl_ms=settings.workers.lock_ttl_ms,
            durable=settings.inbox_durability == "postgres",
        )
        for config in load(settings.producers_file)
    )
    for producer in made:
        stack.push_async_callback(producer.close)
    return Producers(made, tuple(loops(list(made), metrics)))
