"""The hub's features, one builder each, assembled on one `AsyncExitStack`.

A builder makes its part from the parts it is given and registers the part's clean-up
on the stack, so a start-up that fails halfway releases what was built before it. The
stack unwinds in reverse, which is why the hub builds them in this order:

    tracing.tracing         the app's Tracing (made by create_app: FastAPI's
                            instrumentation wraps the middleware it builds)
    tracing.start_tracing   exporting, asyncpg's instrumentation    (flushed last)
    clients.database        PostgreSQL engine
    clients.redis_clients   request and bulk Redis clients
    inbox.inbox             store, Pub/Sub hub, change reader, clock (made, not started)
    inbox.durable_inbox     durable inbox mode's log (or none)
    routing.routing         topics and preferences
    delayed.delayed_queue   the delayed queue, its transition log and mover plan
    epoch.epoch_watch       notices Redis losing data and rebuilds it
    publishing.publishing   ingest, rules, scheduled notifications
    publishing.producers    periodic producers
    webpush.webpush         VAPID keys, push subscriptions, users' addresses
    outbox.outbox           the webhook outbox: sender and dispatcher
    outbox.channel_sends    the channel worker: e-mails and Web Pushes into the outbox
    escalation.escalation   escalation steps: scheduled by publishes, run when due
    delayed.mover_loops     the delayed queue's loops (its consumer needs ingest)
    runner.runner           every feature's background loops
    inbox.open_streams      the hub's listener and the stream clock (stopped first)

`api/app.py` calls them all; `notifyhub restore` and tests call only the ones they need.
"""

from notifyhub.features.clients import Database, RedisClients, database, engine, redis_clients
from notifyhub.features.delayed import DelayedQueue, delayed_queue, mover_loops
from notifyhub.features.epoch import Epoch, epoch_watch, restore_redis
from notifyhub.features.escalation import Escalation, escalation
from notifyhub.features.inbox import (
    Durable,
    Inbox,
    durable_inbox,
    inbox,
    inbox_store,
    open_streams,
)
from notifyhub.features.outbox import Outbox, channel_sends, outbox
from notifyhub.features.publishing import Producers, Publishing, producers, publishing
from notifyhub.features.routing import Routing, routing
from notifyhub.features.runner import runner
from notifyhub.features.tracing import start_tracing, tracing
from notifyhub.features.webpush import WebPush, webpush

__all__ = [
    "Database",
    "DelayedQueue",
    "Durable",
    "Epoch",
    "Escalation",
    "Inbox",
    "Outbox",
    "Producers",
    "Publishing",
    "RedisClients",
    "Routing",
    "WebPush",
    "channel_sends",
    "database",
    "delayed_queue",
    "durable_inbox",
    "engine",
    "epoch_watch",
    "escalation",
    "inbox",
    "inbox_store",
    "mover_loops",
    "open_streams",
    "outbox",
    "producers",
    "publishing",
    "redis_clients",
    "restore_redis",
    "routing",
    "runner",
    "start_tracing",
    "tracing",
    "webpush",
]
