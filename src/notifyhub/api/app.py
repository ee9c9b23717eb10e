"""The composition root: `create_app(settings)`, whose lifespan assembles the hub from
its features' builders (features/), and the routes and middleware it serves them with."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from starlette.types import ASGIApp

from notifyhub import __version__, features
from notifyhub.api.cors import ProblemCORSMiddleware
from notifyhub.api.deadline import RequestDeadline
from notifyhub.api.deps import State
from notifyhub.api.docs import install_docs
from notifyhub.api.errors import install_error_handlers
from notifyhub.api.fastpath import HotRoutes, HubApp, PublishEntry, StreamEntry
from notifyhub.api.limits import RequestLimits
from notifyhub.api.observe import RequestMetrics
from notifyhub.api.openapi import install_openapi
from notifyhub.api.routers import (
    admin,
    admin_escalation,
    admin_keys,
    admin_lists,
    admin_users,
    audit,
    me,
    notifications,
    ops,
    push,
    stream,
)
from notifyhub.api.routers import broadcast as broadcast_router
from notifyhub.api.routers import browser as browser_router
from notifyhub.api.routers import delayed as delayed_router
from notifyhub.api.routers import deliveries as deliveries_router
from notifyhub.api.routers import digests as digests_router
from notifyhub.api.routers import inbox as inbox_router
from notifyhub.api.routers import quiet as quiet_router
from notifyhub.api.routers import routing as routing_router
from notifyhub.api.routers import traces as traces_router
from notifyhub.api.routers import views as views_router
from notifyhub.api.tracing import install_tracing, trace_route
from notifyhub.db.unit import units
from notifyhub.delivery_metrics import DeliveryMetrics
from notifyhub.metrics import Metrics
from notifyhub.services.actions import ActionService
from notifyhub.services.deliveries import DeliveryService
from notifyhub.services.keycache import KeyCache
from notifyhub.services.quiet_hours import StreamQuiet
from notifyhub.services.revocations import Revocations
from notifyhub.services.tokens import TokenService
from notifyhub.services.users import UserLookup
from notifyhub.settings import Settings
from notifyhub.store.ratelimit import RateLimiter
from notifyhub.store.revocations import Revocation, RevocationStore
from notifyhub.tracing import Tracing
from notifyhub.workers.runner import Runner

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)


def create_app(settings: Settings, *, span_exporter: SpanExporter | None = None) -> HubApp:
    """The hub for `settings`; traced when OTEL_TRACES_EXPORTER names an exporter, or
    into `span_exporter` when given (tests)."""
    if settings.redis_url is None or settings.database_url is None:
        raise ValueError(
            "create_app needs redis_url and database_url (the CLI starts embedded ones)"
        )
    metrics = Metrics()
    delivery_metrics = DeliveryMetrics(metrics.registry)  # once per app, not per lifespan
    tracing = features.tracing(settings, span_exporter)

    @asynccontextmanager
    async def lifespan(app: HubApp) -> AsyncIterator[State]:
        """One builder per feature, in dependency order; the stack releases what they
        made in reverse, at shutdown or as soon as one of them fails."""
        async with AsyncExitStack() as stack:
            features.start_tracing(stack, tracing)
            db = features.database(stack, settings)
            clients = await features.redis_clients(stack, settings, tracing)
            inbox = features.inbox(settings, clients, metrics, tracing)
            durable = features.durable_inbox(stack, settings, db, inbox.store, metrics)
            routing = features.routing(clients, db, inbox.store)
            delayed = features.delayed_queue(stack, settings, clients, db, tracing)
            epoch = await features.epoch_watch(
                settings,
                clients,
                db,
                routing,
                delayed,
                durable,
                metrics,
                on_loss=inbox.hub.resync_all,
            )
            publishing = features.publishing(
                settings, clients, db, inbox.store, routing, delayed, durable, metrics, tracing
            )
            stack.push_async_callback(publishing.views.close)
            stack.push_async_callback(publishing.fanouts.close)
            stack.push_async_callback(publishing.routing_traces.close)
            producers = features.producers(stack, settings, clients, db, publishing.ingest, metrics)
            webpush = await features.webpush(settings, db)
            outbox = features.outbox(
                stack,
                settings,
                db,
                metrics,
                delivery_metrics,
                tracing,
                webpush.vapid,
                webpush.quiet,
            )
            channel_loops = features.channel_sends(
                settings, db, outbox, publishing.ingest, publishing.routing_traces, metrics
            )
            escalation = features.escalation(
                settings, clients, db, outbox, publishing.ingest, publishing.routing_traces, metrics
            )
            runner = features.runner(
                stack,
                inbox.loops,
                features.mover_loops(delayed, publishing.scheduled, settings, metrics, tracing),
                durable.loops,
                epoch.loops,
                producers.loops,
                outbox.loops,
                channel_loops,
                escalation.loops,
                publishing.loops,
            )
            keys_cache = KeyCache(settings.api_keys.cache_ttl_s, settings.api_keys.cache_stale_s)
            revocations = _revocations(stack, clients, db, inbox, keys_cache)
            quiet_streams = StreamQuiet(webpush.quiet, units(db.sessionmaker))
            stack.push_async_callback(quiet_streams.close)  # after the streams close
            await features.open_streams(stack, inbox)
            await revocations.load()
            limiter = RateLimiter(clients.redis, clients.keys, settings.rate_limits)
            stack.push_async_callback(limiter.aclose)
            await runner.start()
            app.running = state = _state(
                settings,
                metrics,
                runner,
                db=db,
                clients=clients,
                inbox=inbox,
                durable=durable,
                routing=routing,
                delayed=delayed,
                publishing=publishing,
                outbox=outbox,
                webpush=webpush,
                escalation=escalation,
                epoch=epoch,
                limiter=limiter,
                keys_cache=keys_cache,
                revocations=revocations,
                quiet_streams=quiet_streams,
            )
            try:
                yield state
            finally:
                app.running = None

    app = HubApp(
        title="notifyhub",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # A body without a Content-Type is read as JSON, as the publish fast path reads
        # it. No cross-site risk: every route wants an Authorization header (no cookies),
        # which a browser sends cross-site only after a CORS preflight.
        strict_content_type=False,
    )
    install_error_handlers(app)
    install_openapi(app)
    install_docs(app)  # /docs and /redoc from the hub's own files
    routers = (
        notifications,
        inbox_router,
        me,
        push,
        stream,
        admin,
        admin_keys,
        admin_lists,
        digests_router,  # before admin_users: its `{user:path}` would take `.../digests`
        admin_escalation,  # before admin_users: its `{user:path}` would take the suffix
        admin_users,
        audit,
        routing_router,
        delayed_router,
        ops,
    )
    for router in (module.router for module in routers):
        app.include_router(router)
    app.include_router(traces_router.router)
    app.include_router(broadcast_router.router)
    app.include_router(views_router.admin)
    app.include_router(views_router.me)
    app.include_router(browser_router.router)
    app.include_router(deliveries_router.router)
    app.include_router(quiet_router.router)
    install_tracing(app, tracing)
    app.chain = _chain(app, settings, metrics, tracing)
    return app


def _state(
    settings: Settings,
    metrics: Metrics,
    runner: Runner,
    *,
    db: features.Database,
    clients: features.RedisClients,
    inbox: features.Inbox,
    durable: features.Durable,
    routing: features.Routing,
    delayed: features.DelayedQueue,
    publishing: features.Publishing,
    outbox: features.Outbox,
    webpush: features.WebPush,
    escalation: features.Escalation,
    epoch: features.Epoch,
    limiter: RateLimiter,
    keys_cache: KeyCache,
    revocations: Revocations,
    quiet_streams: StreamQuiet,
) -> State:
    """What requests see: the features' parts, and the request-only services on them."""
    return State(
        settings=settings,
        redis=clients.redis,
        engine=db.engine,
        sessionmaker=db.sessionmaker,
        store=inbox.store,
        hub=inbox.hub,
        reader=inbox.reader,
        clock=inbox.clock,
        tokens=TokenService(settings),
        keys_cache=keys_cache,
        revocations=revocations,
        ingest=publishing.ingest,
        inbox=publishing.inbox,
        views=publishing.views,
        routing_traces=publishing.routing_traces,
        fanouts=publishing.fanouts,
        durable=durable.log,
        topics=routing.topics,
        rules=publishing.rules,
        preferences=routing.preferences,
        delayed=delayed.service,
        metrics=metrics,
        runner=runner,
        deliveries=DeliveryService(outbox.sender, outbox.targets),
        dispatcher=outbox.dispatcher,
        limiter=limiter,
        users=UserLookup(inbox.store, inbox.presence, routing.preferences, publishing.rules),
        actions=ActionService(inbox.store, units(db.sessionmaker), outbox.sender, durable.log),
        vapid=webpush.vapid,
        push_subscriptions=webpush.subscriptions,
        profiles=webpush.profiles,
        quiet=webpush.quiet,
        quiet_streams=quiet_streams,
        escalations=escalation.service,
        epoch=epoch.watch,
    )


def _revocations(
    stack: AsyncExitStack,
    clients: features.RedisClients,
    db: features.Database,
    inbox: features.Inbox,
    keys: KeyCache,
) -> Revocations:
    """Revocations heard on the hub's Pub/Sub: a revoked key leaves the key cache, a user's
    "not before" the token check's; after a gap both look again (the stores know)."""
    store = RevocationStore(clients.redis, clients.keys, inbox.store.doorbells)
    revocations = Revocations(store, inbox.hub, units(db.sessionmaker))
    stack.push_async_callback(revocations.close)

    def heard(revocation: Revocation) -> None:
        if revocation.key_id is not None:
            keys.forget(revocation.key_id)
        revocations.heard(revocation)

    inbox.hub.on_revocation.append(heard)
    inbox.hub.on_subscribed.extend((keys.expire_all, revocations.reload))
    return revocations


def _chain(app: HubApp, settings: Settings, metrics: Metrics, tracing: Tracing) -> ASGIApp:
    """The one middleware chain every HTTP request passes, outermost first: metrics,
    CORS (when configured), limits, the deadline, then the hot routes or FastAPI."""
    publish: ASGIApp = PublishEntry(app.fastapi)
    hot = app.hot = HotRoutes(
        app.fastapi,
        stream_entry=StreamEntry(deadline_s=settings.request_deadline_s),
        publish_entry=trace_route(publish, tracing, "POST", notifications.PATH),
    )
    chain: ASGIApp = RequestDeadline(
        hot, seconds=settings.request_deadline_s, metrics=metrics, exempt=hot.long_lived
    )
    chain = RequestLimits(chain, max_body_bytes=settings.limits.max_body_bytes)
    if settings.cors_origins:
        chain = ProblemCORSMiddleware(
            chain,
            allow_origins=settings.cors_origins,
            allow_credentials=True,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["*"],
        )
    return RequestMetrics(chain, metrics, exempt=hot.long_lived)
