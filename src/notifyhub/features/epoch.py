"""Builders for the epoch watch (rebuild Redis when it lost data) and `notifyhub restore`."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

from notifyhub.db.unit import units
from notifyhub.features.clients import Database, RedisClients, database, redis_clients
from notifyhub.features.delayed import DelayedQueue, delayed_queue
from notifyhub.features.inbox import Durable, durable_inbox, inbox_store
from notifyhub.features.routing import Routing, routing
from notifyhub.metrics import Metrics
from notifyhub.services.epoch import EpochWatch
from notifyhub.settings import DatabaseSettings, Settings
from notifyhub.workers.runner import Loop

RESTORE_BOUNDS = DatabaseSettings(
    connect_timeout_s=5.0, statement_timeout_s=30.0, pool_timeout_s=5.0
)
"""`notifyhub restore` reads whole tables in one statement and no client waits on it."""


@dataclass(frozen=True, slots=True)
class Epoch:
    watch: EpochWatch
    loops: tuple[Loop, ...]


async def epoch_watch(
    settings: Settings,
    clients: RedisClients,
    database: Database,
    routing: Routing,
    delayed: DelayedQueue,
    durable: Durable,
    metrics: Metrics,
    *,
    on_loss: Callable[[], None] | None = None,
) -> Epoch:
    """The watch, warmed (topic caches, and what Redis lost since it last ran), and its
    loop. Nothing to release."""
    watch = EpochWatch(
        clients.redis,
        units(database.sessionmaker),
        clients.keys,
        routing.topics,
        routing.preferences,
        delayed.service,
        durable.log,
        metrics=metrics,
        on_loss=on_loss,
    )
    await watch.warm()
    interval_s = settings.workers.epoch_check_interval_s
    return Epoch(watch, (Loop("epoch-watch", interval_s, watch.check, metrics),))


async def restore_redis(settings: Settings) -> None:
    """The same rebuild the hub runs when its epoch marker is missing, from only the
    features it needs."""
    metrics = Metrics()
    async with AsyncExitStack() as stack:
        db = database(stack, settings, bounds=RESTORE_BOUNDS)
        clients = await redis_clients(stack, settings)
        store = inbox_store(settings, clients, metrics)
        durable = durable_inbox(stack, settings, db, store, metrics)
        delayed = delayed_queue(stack, settings, clients, db)
        found = routing(clients, db, store)
        topics, preferences = found.topics, found.preferences
        watch = EpochWatch(
            clients.redis,
            units(db.sessionmaker),
            clients.keys,
            topics,
            preferences,
            delayed.service,
            durable.log,
        )
        await watch.rebuild()
