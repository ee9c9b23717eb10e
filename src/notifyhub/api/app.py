"""The composition root: `create_app(settings)` and the lifespan that owns every resource."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from starlette.types import ASGIApp

from notifyhub.api.deps import State
from notifyhub.api.docs import install_docs
from notifyhub.api.errors import install_error_handlers
from notifyhub.api.fastpath import HubApp, PublishFastPath, StreamFastPath
from notifyhub.api.limits import RequestLimits
from notifyhub.api.observe import RequestMetrics
from notifyhub.api.openapi import install_openapi
from notifyhub.api.routers import admin, inbox, me, notifications, ops, routing, stream
from notifyhub.api.routers import browser as browser_router
from notifyhub.api.routers import delayed as delayed_router
from notifyhub.api.routers import deliveries as deliveries_router
from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.delivery_metrics import DeliveryMetrics
from notifyhub.metrics import Metrics
from notifyhub.realtime.clock import StreamClock
from notifyhub.realtime.hub import Hub
from notifyhub.realtime.reader import ChangeReader
from notifyhub.services.alerts import AlertSender
from notifyhub.services.caches import EpochWatch
from notifyhub.services.delayed import DelayedService, TransitionLog
from notifyhub.services.deliveries import DeliveryService
from notifyhub.services.durable import DurableInbox
from notifyhub.services.inbox import InboxService
from notifyhub.services.ingest import IngestService
from notifyhub.services.keycache import KeyCache
from notifyhub.services.outbound import AddressGuard, Outbound
from notifyhub.services.preferences import PreferenceService
from notifyhub.services.rules import RuleService
from notifyhub.services.sender import DeliverySender
from notifyhub.services.targets import TargetCheck
from notifyhub.services.tokens import TokenService
from notifyhub.services.topics import TopicService
from notifyhub.settings import Settings
from notifyhub.store.client import check_durability, create_redis
from notifyhub.store.client import close as close_redis
from notifyhub.store.delayed import DelayedStore
from notifyhub.store.idempotency import IdempotencyStore
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import Keys
from notifyhub.store.ratelimit import RateLimiter
from notifyhub.store.topics import TopicCache
from notifyhub.workers.cleaner import Cleaner
from notifyhub.workers.dispatcher import Dispatcher, dispatcher_loop
from notifyhub.workers.producers import Producer
from notifyhub.workers.producers import load as load_producers
from notifyhub.workers.producers import loops as producer_loops
from notifyhub.workers.runner import Loop, Runner
from notifyhub.workers.scheduler import ScheduledNotifications, delayed_loops

log = logging.getLogger(__name__)

OUTBOX_POOL = 4
"""Connections the at-once sender and the dispatcher claim and settle through (twice that
under load); each holds one for a single statement."""


def _producers(
    settings: Settings,
    ingest: IngestService,
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: Redis,
    keys: Keys,
) -> list[Producer]:
    if settings.producers_file is None:
        return []
    return [
        Producer(
            config,
            ingest=ingest,
            sessionmaker=sessionmaker,
            redis=redis,
            keys=keys,
            lock_ttl_ms=settings.workers.lock_ttl_ms,
        )
        for config in load_producers(settings.producers_file)
    ]


def _dispatcher(
    settings: Settings,
    guard: AddressGuard,
    sessionmaker: async_sessionmaker[AsyncSession],
    outbox_engine: AsyncEngine,
    delivery_metrics: DeliveryMetrics,
) -> tuple[DeliverySender, Dispatcher]:
    """The outbox's sender (at-once sends) and dispatcher (retries, alerts, archive).

    The sender claims and settles through `outbox_engine` (relaxed commits: a claim or
    settlement lost in a PostgreSQL crash only re-sends the delivery).
    """
    s = settings.deliveries
    outbound = Outbound(guard, s.response_cap_bytes, s.concurrency)
    sender = DeliverySender(create_sessionmaker(outbox_engine), outbound, s, delivery_metrics)
    alerts = AlertSender(sessionmaker, outbound, s, delivery_metrics)
    return sender, Dispatcher(sender, alerts, sessionmaker, s, delivery_metrics)


def _durable_inbox(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], store: InboxStore
) -> DurableInbox | None:
    """Durable inbox mode's log, or None in the default Redis-only mode."""
    if settings.inbox_durability != "postgres":
        return None
    return DurableInbox(sessionmaker, store)


def create_app(settings: Settings) -> FastAPI:
    if settings.redis_url is None or settings.database_url is None:
        raise ValueError(
            "create_app needs redis_url and database_url (the CLI starts embedded ones)"
        )
    redis_url, database_url = settings.redis_url, settings.database_url
    metrics = Metrics()
    delivery_metrics = DeliveryMetrics(metrics.registry)  # once per app, not per lifespan

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[State]:
        redis = create_redis(
            redis_url,
            pool_size=settings.redis_pool_size,
            pool_timeout_s=settings.redis_pool_timeout_s,
        )
        await check_durability(redis)
        engine = create_engine(database_url)
        keys = Keys(settings.redis_prefix, pubsub_shards=settings.redis_pubsub_shards)
        bulk = create_redis(  # fan-out and stream-read pipelines: one timer per pipeline
            redis_url,
            pool_size=settings.redis_pool_size,
            pool_timeout_s=settings.redis_pool_timeout_s,
            socket_timeout_s=None,
        )
        store = InboxStore(
            redis,
            keys,
            settings.limits,
            on_evicted=metrics.notifications_evicted_total.inc,
            bulk=bulk,
            wait_replicas=settings.redis_wait_replicas,
            wait_timeout_ms=settings.redis_wait_timeout_ms,
        )
        hub = Hub(
            redis_url, store.doorbells, metrics, streams_per_user=settings.limits.streams_per_user
        )
        reader = ChangeReader(store)
        clock = StreamClock(settings.stream)
        runner = Runner()
        cleaner = Cleaner(redis, keys, store, settings.workers, metrics)
        runner.add(Loop("cleaner", settings.workers.cleaner_interval_s, cleaner.run_once, metrics))
        await hub.start()
        clock.start()
        app.state.hub = hub
        app.state.metrics = metrics
        sessionmaker = create_sessionmaker(engine)
        topics = TopicService(sessionmaker, TopicCache(redis, keys, store.scripts))
        preferences = PreferenceService(sessionmaker, store)
        delayed = DelayedService(
            DelayedStore(redis, keys, settings.delayed.sets),
            sessionmaker,
            TransitionLog(sessionmaker),
        )
        durable = _durable_inbox(settings, sessionmaker, store)
        epoch = EpochWatch(redis, keys, topics, preferences, delayed, durable)
        await epoch.warm()
        idempotency = IdempotencyStore(redis, keys, settings.idempotency_ttl_s)
        ingest = IngestService(store, sessionmaker, idempotency, topics, delayed, settings, metrics)
        ingest.durable = durable
        scheduled = ScheduledNotifications(delayed, ingest, sessionmaker)
        for loop in delayed_loops(delayed, scheduled, settings.delayed, metrics):
            runner.add(loop)
        if durable is not None:
            flush_s = settings.inbox_changes_flush_interval_s
            runner.add(Loop("inbox-changes", flush_s, durable.flush_changes, metrics))
            prune = functools.partial(durable.prune, settings.max_ttl_s)
            runner.add(Loop("inbox-prune", settings.workers.cleaner_interval_s, prune, metrics))
        epoch_interval_s = settings.workers.epoch_check_interval_s
        runner.add(Loop("epoch-watch", epoch_interval_s, epoch.check, metrics))
        producers = _producers(settings, ingest, sessionmaker, redis, keys)
        for loop in producer_loops(producers, metrics):
            runner.add(loop)
        outbox_engine = create_engine(database_url, relaxed_commits=True, pool_size=OUTBOX_POOL)
        guard = AddressGuard(
            settings.deliveries_allow_private_networks, settings.deliveries.allow_networks
        )
        delivery_sender, dispatcher = _dispatcher(
            settings, guard, sessionmaker, outbox_engine, delivery_metrics
        )
        runner.add(dispatcher_loop(dispatcher, settings.deliveries, metrics))
        try:
            state = app.state.lifespan = State(
                settings=settings,
                redis=redis,
                engine=engine,
                sessionmaker=sessionmaker,
                store=store,
                hub=hub,
                reader=reader,
                clock=clock,
                tokens=TokenService(settings),
                keys_cache=KeyCache(),
                ingest=ingest,
                inbox=InboxService(store),
                topics=topics,
                rules=RuleService(ingest, metrics),
                preferences=preferences,
                delayed=delayed,
                metrics=metrics,
                runner=runner,
                deliveries=DeliveryService(delivery_sender, sessionmaker, TargetCheck(guard)),
                dispatcher=dispatcher,
                limiter=RateLimiter(redis, keys, settings.rate_limits),
            )
            delivery_sender.start()
            state["inbox"].durable = durable
            app.state.durable = durable
            await runner.start()
            yield state
        finally:
            open_streams = hub.stream_count
            await hub.stop()
            await clock.stop()
            await reader.aclose()
            await runner.stop()
            await delivery_sender.stop()
            await outbox_engine.dispose()
            for producer in producers:
                await producer.close()
            await delayed.transitions.flush()
            if durable is not None:
                await durable.flush_changes()
            await close_redis(redis)
            await close_redis(bulk)
            await engine.dispose()
            log.info("notifyhub stopped: closed %d streams", open_streams)

    app = HubApp(
        title="notifyhub", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None
    )
    install_error_handlers(app)
    install_openapi(app)
    install_docs(app)  # /docs and /redoc from the hub's own files
    routers = (notifications, inbox, me, stream, admin, routing, delayed_router, ops)
    for router in (module.router for module in routers):
        app.include_router(router)
    app.include_router(browser_router.router)
    app.include_router(deliveries_router.router)
    _install_middleware(app, settings, metrics)
    return app


def _install_middleware(app: HubApp, settings: Settings, metrics: Metrics) -> None:
    """The middleware stack, and the shorter one event streams take (`HubApp`)."""
    # Outermost last. Streams skip this stack: each middleware a request passes through
    # can hold a frame for as long as the request lasts, and a stream lasts hours.
    cors = {
        "allow_origins": settings.cors_origins,
        "allow_credentials": True,
        "allow_methods": ["GET", "POST", "PATCH", "DELETE"],
        "allow_headers": ["*"],
    }
    max_body_bytes = settings.limits.max_body_bytes
    app.add_middleware(PublishFastPath, handlers=app.exception_handlers)
    app.add_middleware(RequestLimits, max_body_bytes=max_body_bytes)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, **cors)  # type: ignore[arg-type]
    app.add_middleware(RequestMetrics, metrics=metrics)
    streams: ASGIApp = StreamFastPath(app.exception_handlers)
    streams = RequestLimits(streams, max_body_bytes=max_body_bytes)
    if settings.cors_origins:
        streams = CORSMiddleware(streams, **cors)  # type: ignore[arg-type]
    app.stream_entry = streams
