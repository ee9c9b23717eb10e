"""Builder for the outbox (webhooks, e-mail, RabbitMQ, Web Push): the at-once sender,
alerts and the dispatcher."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

from notifyhub.db.engine import create_sessionmaker
from notifyhub.db.unit import units
from notifyhub.delivery_metrics import DeliveryMetrics
from notifyhub.features.clients import Database, engine
from notifyhub.features.webpush import address_guard
from notifyhub.metrics import Metrics
from notifyhub.services.alerts import AlertSender
from notifyhub.services.channel_rows import ChannelRows
from notifyhub.services.channels import ChannelExpander
from notifyhub.services.digests import DigestBook, DigestSender
from notifyhub.services.ingest import IngestService
from notifyhub.services.outbound import Outbound
from notifyhub.services.quiet_hours import QuietHours
from notifyhub.services.rabbitmq_target import RabbitTarget
from notifyhub.services.sender import DeliverySender
from notifyhub.services.targets import TargetCheck
from notifyhub.services.vapid import VapidKeys
from notifyhub.services.webpush_target import WebPushTarget
from notifyhub.settings import Settings
from notifyhub.store.traces import RoutingTraces
from notifyhub.tracing import Tracing
from notifyhub.workers.channels import ChannelWorker, channel_loop
from notifyhub.workers.digests import DigestWorker, digest_loop
from notifyhub.workers.dispatcher import Dispatcher, dispatcher_loop
from notifyhub.workers.runner import Loop

OUTBOX_POOL = 8
"""Connections the at-once sender and the dispatcher claim and settle through at most;
each holds one for a single statement."""


@dataclass(frozen=True, slots=True)
class Outbox:
    sender: DeliverySender
    dispatcher: Dispatcher
    targets: TargetCheck
    """The SSRF guard's rule, for definitions' URLs at `PUT` time."""
    rows: ChannelRows
    """Adds e-mail and push deliveries (channel sends, digests, escalation steps),
    sent at once by `sender`, or when a user's quiet hours end."""
    loops: tuple[Loop, ...]


def outbox(
    stack: AsyncExitStack,
    settings: Settings,
    database: Database,
    metrics: Metrics,
    delivery_metrics: DeliveryMetrics,
    tracing: Tracing | None = None,
    vapid: VapidKeys | None = None,
    quiet: QuietHours | None = None,
) -> Outbox:
    """The sender runs from here (stopped, then its engine disposed, when the stack
    closes); the dispatcher's loop joins the runner.

    The sender claims and settles through an engine of its own with relaxed commits: a
    claim or settlement lost in a PostgreSQL crash only re-sends the delivery."""
    s = settings.deliveries
    outbox_engine = engine(stack, settings, relaxed_commits=True, pool_size=OUTBOX_POOL)
    guard = address_guard(settings)
    outbound = Outbound(guard, s.response_cap_bytes, s.concurrency)
    amqp_url = settings.amqp_url.get_secret_value() if settings.amqp_url else None
    outbox_units = units(create_sessionmaker(outbox_engine))
    sender = DeliverySender(
        outbox_units,
        outbound,
        s,
        delivery_metrics,
        tracing or Tracing(),
        rabbitmq=RabbitTarget(amqp_url),
        webpush=None if vapid is None else WebPushTarget(outbox_units, outbound, vapid),
    )
    alerts = AlertSender(units(database.sessionmaker), outbound, s, delivery_metrics)
    dispatcher = Dispatcher(sender, alerts, database.sessionmaker, s, delivery_metrics)
    stack.push_async_callback(sender.stop)
    sender.start()
    loops = (dispatcher_loop(dispatcher, s, metrics),)
    rows = ChannelRows(sender, quiet)
    return Outbox(sender, dispatcher, TargetCheck(guard), rows, loops)


def channel_sends(
    settings: Settings,
    database: Database,
    outbox: Outbox,
    ingest: IngestService,
    traces: RoutingTraces,
    metrics: Metrics,
) -> tuple[Loop, ...]:
    """The channel worker's loop (e-mail and Web Push sends expanded into the outbox
    through `outbox.rows`), woken by every publish with channels through `ingest`; and
    the digest worker's, which sends the digests whose window closed."""
    expander = ChannelExpander(settings.deliveries.channel_chunk, outbox.rows, DigestBook())
    worker = ChannelWorker(units(database.sessionmaker), expander, traces)
    loop = channel_loop(worker, settings.deliveries, metrics)
    ingest.on_channel_send(loop.wake)
    digests = DigestWorker(units(database.sessionmaker), DigestSender(outbox.rows))
    return (loop, digest_loop(digests, settings.deliveries, metrics))
