"""Builders for the inbox: its store, the Pub/Sub hub, the stream reader and clock, and
durable inbox mode."""

from __future__ import annotations

import functools
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass

from notifyhub.db.unit import units
from notifyhub.features.clients import Database, RedisClients
from notifyhub.metrics import Metrics
from notifyhub.realtime.clock import StreamClock
from notifyhub.realtime.hub import Hub
from notifyhub.realtime.reader import ChangeReader
from notifyhub.services.durable import DurableInbox
from notifyhub.settings import Settings
from notifyhub.store.inbox import InboxStore
from notifyhub.store.presence import StreamPresence
from notifyhub.store.traces import FLUSH_S, StreamedTally
from notifyhub.tracing import Tracing
from notifyhub.workers.cleaner import Cleaner
from notifyhub.workers.runner import Loop

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Inbox:
    store: InboxStore
    hub: Hub
    reader: ChangeReader
    clock: StreamClock
    presence: StreamPresence
    loops: tuple[Loop, ...]
    """The cleaner (expired copies and their index), the stream presence reports and,
    routing traces on, the flush of the streams' counts to the traces."""


@dataclass(frozen=True, slots=True)
class Durable:
    log: DurableInbox | None
    """Durable inbox mode's log; None in the default Redis-only mode."""
    loops: tuple[Loop, ...]


def inbox_store(settings: Settings, clients: RedisClients, metrics: Metrics) -> InboxStore:
    """Users' inboxes in Redis (nothing to release: it lives on the shared clients)."""
    return InboxStore(
        clients.redis,
        clients.keys,
        settings.limits,
        on_evicted=metrics.notifications_evicted_total.inc,
        bulk=clients.bulk,
        wait_replicas=settings.redis_wait_replicas,
        wait_timeout_ms=settings.redis_wait_timeout_ms,
    )


def inbox(
    settings: Settings, clients: RedisClients, metrics: Metrics, tracing: Tracing | None = None
) -> Inbox:
    """The inbox's parts, made but not started (`open_streams` starts them)."""
    store = inbox_store(settings, clients, metrics)
    assert settings.redis_url is not None  # (redis_clients has checked)
    streamed = StreamedTally(clients.redis, clients.keys) if settings.routing_trace_users else None
    hub = Hub(
        settings.redis_url,
        store.doorbells,
        metrics,
        streams_per_user=settings.limits.streams_per_user,
        cap_retry_after_s=settings.stream.retry_ms / 1000,  # as a dropped stream's `retry:`
        tracing=tracing or Tracing(),
        streamed=streamed,
        announce_seqs=store.announcement_seqs,
    )
    store.announce_here = hub.announce_here
    workers = settings.workers
    cleaner = Cleaner(clients.redis, clients.keys, store, workers, metrics)
    loop = Loop("cleaner", workers.cleaner_interval_s, cleaner.run_once, metrics)
    interval_s = settings.stream.presence_interval_s
    presence = StreamPresence(clients.redis, clients.keys, lease_s=3 * interval_s)
    report = Loop(
        "stream-presence", interval_s, lambda: presence.report(hub.local_streams()), metrics
    )
    clock = StreamClock(settings.stream)
    loops: tuple[Loop, ...] = (loop, report)
    if streamed is not None:
        loops += (Loop("routing-trace-streams", FLUSH_S, streamed.flush, metrics),)
    return Inbox(store, hub, ChangeReader(store), clock, presence, loops)


async def open_streams(stack: AsyncExitStack, inbox: Inbox) -> None:
    """Start the hub's Pub/Sub listener and the stream clock. Built last, so they stop
    first: every open stream ends before the loops and clients it reads go away."""
    stack.push_async_callback(inbox.reader.aclose)
    stack.push_async_callback(_withdraw, inbox.presence)
    if inbox.hub.streamed is not None:  # once every stream has ended: their last counts
        stack.push_async_callback(inbox.hub.streamed.close)
    stack.push_async_callback(inbox.clock.stop)
    stack.push_async_callback(_stop_hub, inbox.hub)
    await inbox.hub.start()
    inbox.clock.start()


async def _withdraw(presence: StreamPresence) -> None:
    """After the hub closed every stream: this process reports none (best effort; its
    reports lapse by themselves otherwise)."""
    try:
        await presence.withdraw()
    except Exception:
        log.warning("stream presence not withdrawn: it lapses on its own", exc_info=True)


async def _stop_hub(hub: Hub) -> None:
    open_streams = hub.stream_count
    await hub.stop()
    log.info("notifyhub stopping: closed %d streams", open_streams)


def durable_inbox(
    stack: AsyncExitStack,
    settings: Settings,
    database: Database,
    store: InboxStore,
    metrics: Metrics,
) -> Durable:
    """Durable inbox mode (`inbox_durability = postgres`): the log and its loops; the
    changes still buffered are flushed when the stack closes."""
    if settings.inbox_durability != "postgres":
        return Durable(None, ())
    durable = DurableInbox(units(database.sessionmaker), store)
    stack.push_async_callback(durable.flush_changes)
    flush_s, prune_s = settings.inbox_changes_flush_interval_s, settings.workers.cleaner_interval_s
    prune = functools.partial(durable.prune, settings.max_ttl_s)
    loops = (
        Loop("inbox-changes", flush_s, durable.flush_changes, metrics),
        Loop("inbox-prune", prune_s, prune, metrics),
    )
    return Durable(durable, loops)
