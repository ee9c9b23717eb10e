"""A lean ASGI Server-Sent-Events response for one user's inbox stream.

One connection costs one coroutine and a doorbell: no queue, no task group, no timer, no
Redis connection of its own (reads go through the shared pool; the process's
`StreamClock` pings it and enforces the send timeout). The hub's HTTP protocol
(api/protocol.py) tells the stream when its client leaves, and takes a broadcast's
announcement for an idle stream without waking it (`Connection`); under another server a
small task awaits ASGI's `http.disconnect` instead, and every event is sent through ASGI.
Catch-up and live events are the same code path: read the change log after the
cursor, send it, wait for the doorbell.

When Redis loses a user's data (FLUSHALL, a restart without persistence, a failover to an
empty replica) the user's seq starts again from 1 under a new epoch (lua/common.lua), so
a cursor means something only with its epoch: event ids carry it (`<seq>-<epoch>`,
events.py), every log read returns the user's current one, and a stream whose cursor is
of another epoch, or above the user's seq, sends one `reset` and goes on from the new
state. Comparing seqs alone would miss a loss followed by more changes than the cursor
(the new seq passes it again); an epoch kept by the hub alone would not survive the
client's reconnect to another process. The check costs a string comparison per read.

A broadcast's notification may be announced before its copies are written
(realtime/hub.py): a stream that has sent exactly the seq the announcement names sends
it at once, and notes its id as shown ahead. Until the copy's change comes through the
log (or an offer), every id the stream sends carries the ids shown ahead
(`<seq>-<epoch>.<id>`, events.py), and the copy's change sends its `counts` without its
`notification`: shown once, live or on a resume. An id still ahead after AHEAD_TTL_S (its
copy never came: the publish failed and was not retried) is dropped.

Tracing on, the write that follows a traced doorbell (realtime/hub.py `traced`) is a
`notifyhub.stream.write` span of the publish's trace; off, the stream only finds the
hub's `traced` map empty.

Routing traces on, each `notification` event written is counted in the hub's
`streamed` tally (the trace's "streamed to K connections", store/traces/tally.py): a
dict increment per event; off, the stream finds `streamed` None.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Protocol

from prometheus_client import Counter
from redis.exceptions import RedisError
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from ulid import ULID

from notifyhub.domain.views import ViewSet
from notifyhub.metrics import Metrics, StreamEnd
from notifyhub.realtime.clock import StreamClock
from notifyhub.realtime.events import (
    MAX_AHEAD,
    EventId,
    announced_frame,
    counts_data,
    counts_part,
    data_frame,
    frame,
    offered_id,
)
from notifyhub.realtime.hub import Hub
from notifyhub.realtime.quiet import QuietFlag, flagged
from notifyhub.realtime.reader import ChangeReader
from notifyhub.realtime.subscriber import Subscriber
from notifyhub.settings import StreamSettings
from notifyhub.store.changes import (
    Change,
    Changes,
    ChangeType,
    NotificationChange,
    ViewsChange,
)
from notifyhub.store.inbox import InboxStore, Position
from notifyhub.tracing import Attributes

log = logging.getLogger(__name__)

CATCH_UP_BATCH = 200
EXACT: frozenset[str] = frozenset()
"""No view marked inexact (one empty set for every stream: each new one is 216 bytes)."""
CONNECTION = "notifyhub.connection"
"""The scope key under which the hub's HTTP protocol (api/protocol.py) offers a stream
its `Connection`."""


class Connection(Protocol):
    """What the hub's own HTTP server does for a stream beyond ASGI."""

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback()` once when the client's connection closes (at once if it
        has): no task per stream awaiting `http.disconnect`."""

    def write_now(self, body: bytes) -> bool:
        """Write `body` as the response's next chunk now, without a task switch; False
        when it may not (the client is not keeping up, the connection is closing):
        send it through ASGI then."""

    def bound_send_buffer(self, size_bytes: int) -> None:
        """Give the connection a kernel send buffer of `size_bytes` instead of the
        auto-tuned one (StreamSettings.send_buffer_bytes); 0 leaves it."""


AHEAD_TTL_S = 600.0
"""How long a stream keeps waiting for the copy of a notification it showed ahead."""
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
"""No `Connection`: it is hop-by-hop and the server's to send (a `close` when the client
asked for it or speaks HTTP/1.0; HTTP/1.1 keeps the connection alive without one)."""


class SendTimeout(Exception):
    """The client did not take a frame within the send timeout."""


def change_frame(change: Change, epoch: str, ahead: list[str] | None = None) -> bytes | None:
    """The event for one change-log entry (its type's, store/changes.py); None when the
    entry sends none (a notification deleted since, or a quiet copy, or, with `ahead`,
    the copy of a notification shown ahead: its id leaves `ahead`). A collapse-key copy
    that sends none still ends the copy it replaced: a `delete` of that one."""
    entry = change.entry
    if (
        ahead
        and isinstance(entry, NotificationChange)
        and not entry.resurfaced
        and entry.id in ahead
    ):
        ahead.remove(entry.id)
        return None
    data = entry.event_data(change.content, change.state)
    if data is not None:
        return data_frame(entry.type, entry.seq, epoch, data, ahead or ())
    if isinstance(entry, NotificationChange) and (gone := entry.replaced_data()) is not None:
        return data_frame(ChangeType.DELETE, entry.seq, epoch, gone, ahead or ())
    return None


def fresh_ahead(ids: Collection[str], now_s: float) -> tuple[str, ...]:
    """The ids of `ids` (ULIDs) shown ahead less than AHEAD_TTL_S ago."""
    return tuple(nid for nid in ids if now_s - ULID.from_str(nid).timestamp < AHEAD_TTL_S)


class InboxStream(Response):
    """The ASGI response serving one stream until the client leaves or the hub stops."""

    media_type = "text/event-stream"

    def __init__(
        self,
        *,
        store: InboxStore,
        reader: ChangeReader,
        hub: Hub,
        clock: StreamClock,
        sub: Subscriber,
        settings: StreamSettings,
        metrics: Metrics,
        tenant: str,
        user: str,
        last_event_id: EventId | None,
        tenant_views: Callable[[str], ViewSet | None] | None = None,
        synced_position: Callable[[str, str], Awaitable[Position]] | None = None,
        quiet: QuietFlag | None = None,
    ) -> None:
        self._store, self._reader, self._hub, self._sub = store, reader, hub, sub
        self._quiet = quiet
        """Whether the user is in quiet hours (their `notification` events say so)."""
        self._tenant_views = tenant_views
        """The tenant's views as this process last knew them (services/views.py `known`)."""
        self._synced_position = synced_position
        """The user's position, their copy of the views synced first (services/views.py
        `position_of`), for `_position`."""
        self._inexact: frozenset[str] = EXACT
        """The views whose counts this stream sends marked `exact: false`: the tenant's, when
        the user's copy of them was older than theirs at the opening (or a reset), until
        a `views` change (the recount reached the user) comes through the log, or a read
        of the user's position after a change finds the copy current (a sync that found
        the same definitions logs nothing)."""
        self._clock = clock
        self._settings, self._metrics = settings, metrics
        self._tenant, self._user = tenant, user
        self._cursor = last_event_id
        self._ahead: tuple[str, ...] = (
            fresh_ahead(last_event_id.ahead, time.time()) if last_event_id is not None else ()
        )
        """Notifications this client was shown ahead of their copies (announced); a tuple,
        so that the many streams with none share the empty one."""
        self._client_left = False
        self._epoch = ""
        """The epoch of the seqs this stream sent (lua/common.lua)."""
        self._connection: Connection | None = None
        """The hub's HTTP protocol serving this stream, if it is the server."""
        self._opening: bytes | None = None
        """A new stream's opening `counts` frame, read before its 200 (`_open`)."""
        self._prefetched: Changes | None = None
        """A resumed stream's first read, made before its 200 (`_open`)."""
        self.status_code = 200
        self.background = None
        self.on_start: Callable[[int], None] | None = None
        """Told the status just before the response starts (request metrics)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:  # read before the 200: a Redis outage is still a 503 problem, not an empty 200
            cursor = await self._open()
            watcher = self._watch(scope, receive)
        except BaseException:
            self._hub.detach(self._sub)
            raise
        self._sub.task = asyncio.current_task()
        self._clock.add(self._sub)
        reason = StreamEnd.ERROR  # a bug: raised on
        try:
            reason = await self._run(send, cursor)
        except asyncio.CancelledError:
            reason = StreamEnd.SHUTDOWN  # the server stopped waiting for it
            raise
        finally:
            self._metrics.stream_ended(reason)
            self._clock.discard(self._sub)
            self._sub.task = self._sub.announce_now = None  # (no cycle left with the stream)
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            self._hub.detach(self._sub)

    def _watch(self, scope: Scope, receive: Receive) -> asyncio.Task[None] | None:
        """Learn when the client leaves: from the hub's protocol (the stream's `Connection`,
        which also bounds its send buffer), else from a task awaiting `http.disconnect`
        (returned). A client gone already ends the stream at its first wait."""
        connection: Connection | None = scope.get(CONNECTION)
        if connection is None:
            return asyncio.create_task(self._watch_disconnect(receive))
        connection.bound_send_buffer(self._settings.send_buffer_bytes)
        connection.on_close(self._left)
        self._connection = connection
        self._sub.announce_now = self._announce_now
        return None

    async def _open(self) -> int:
        """The first read; the seq the stream starts after. A new stream reads its
        position (kept as its opening `counts` frame); a resumed one the changes after its
        cursor, kept for its first catch-up (one round trip instead of two: a reconnect
        storm is made of these). Neither is held longer than its first send: an idle
        stream lives for hours. Its shard's doorbells are heard first (`Hub.subscribe_for`):
        a change after the read rings it."""
        await self._hub.subscribe_for(self._sub)
        if self._cursor is None:
            opening = self._mark(await self._position())
            self._epoch = opening.epoch
            data = position_data(opening, self._inexact)
            self._opening = frame("counts", opening.seq, opening.epoch, data)
            return opening.seq
        cursor, self._epoch = self._cursor.seq, self._cursor.epoch
        self._cursor = None
        self._prefetched = await self._reader.changes(
            self._tenant, self._user, cursor, CATCH_UP_BATCH
        )
        return cursor

    async def _run(self, send: Send, cursor: int) -> StreamEnd:
        """Serve the stream until it ends; why it ended."""
        try:
            if self.on_start is not None:
                self.on_start(200)
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            await self._write(send, b"retry: %d\n\n" % self._settings.retry_ms)
            if self._opening is not None:
                await self._write(send, self._opening)
                self._opening = None
            while not self._sub.closed:
                if self._hub.traced:
                    cursor = await self._traced(send, cursor, None)
                else:
                    cursor = await self._catch_up(send, cursor)
                cursor = await self._live(send, cursor)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except SendTimeout:
            return StreamEnd.SEND_TIMEOUT
        except OSError as exc:
            log.info("stream for %s/%s ended: %s", self._tenant, self._user, exc)
            return StreamEnd.CLIENT_LEFT
        except RedisError as exc:  # the client resumes from its Last-Event-ID elsewhere
            log.warning("stream for %s/%s ended, Redis: %r", self._tenant, self._user, exc)
            return StreamEnd.REDIS_ERROR
        return StreamEnd.CLIENT_LEFT if self._client_left else StreamEnd.SHUTDOWN

    def _left(self) -> None:
        """The client closed the connection: the stream ends."""
        self._client_left = True
        self._sub.close()

    async def _watch_disconnect(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self._left()

    async def _live(self, send: Send, cursor: int) -> int:
        """Wait for the doorbell (pinging, and sending what is announced, meanwhile) and
        send each offered change that is the stream's next one; the cursor once the log
        must be read."""
        sub = self._sub
        while True:
            # Idle: ping when the clock says so, until rung. Re-reading the log after
            # each ping would cost every idle stream a Redis read per ping interval.
            sub.cursor, sub.epoch = cursor, self._epoch
            while not await sub.wait():
                if sub.announced:
                    await self._send_announced(send, cursor)
                else:
                    await self._write(send, b": ping\n\n")
            if sub.announced:  # before the copies' changes that rang with them
                await self._send_announced(send, cursor)
            ready = self._next_offered(cursor)
            if ready is None:
                return cursor
            if self._hub.traced:
                await self._traced(send, cursor, ready)
            else:
                await self._write(send, ready[2])  # the offered change is the next one
            cursor, self._epoch = ready[0], ready[1]
            self._count_offered(ready[2])
            if sub.latest > cursor:
                return cursor  # more changed meanwhile

    def _next_offered(self, cursor: int) -> tuple[int, str, bytes] | None:
        """The change offered with the doorbell, if it is the next one after `cursor` and
        its frames may be sent as they are (its `counts` alone when its notification was
        shown ahead); None: read the log."""
        ready, self._sub.ready = self._sub.ready, None
        if ready is None or ready[0] != cursor + 1 or self._sub.closed or self._inexact:
            return None  # (an offered change's counts say nothing of `exact`)
        if self._ahead:
            if self._ahead != (offered_id(ready[2]),):
                return None  # the log's ids carry those still ahead
            self._ahead = ()
            return ready[0], ready[1], counts_part(ready[2])
        return ready

    async def _traced(self, send: Send, cursor: int, offered: tuple[int, str, bytes] | None) -> int:
        """Send the `offered` change, else catch up, as a span of the traces that rang
        this stream (the first its parent, the others its links), if any did; the
        cursor after it."""
        traces = self._hub.traced.pop(self._sub, None)
        if traces is None:
            return await self._send_next(send, cursor, offered)
        attributes: Attributes = {
            "notifyhub.tenant": self._tenant,
            "notifyhub.offered": offered is not None,
        }
        tracing = self._hub.tracing
        with tracing.span(
            "notifyhub.stream.write", attributes, parent=traces[0], links=traces[1:]
        ) as span:
            cursor = await self._send_next(send, cursor, offered)
            span.set_attribute("notifyhub.seq", cursor)
        return cursor

    async def _send_next(
        self, send: Send, cursor: int, offered: tuple[int, str, bytes] | None
    ) -> int:
        if offered is None:
            return await self._catch_up(send, cursor)
        await self._write(send, offered[2])
        return offered[0]

    async def _send_announced(self, send: Send, cursor: int) -> None:
        """Send the notifications announced ahead of their copies (`Subscriber.announce`)
        that this stream, at `cursor`, cannot have sent: those announced at exactly its
        cursor and epoch, up to MAX_AHEAD shown ahead at once."""
        announced, self._sub.announced = self._sub.announced, None
        frames, ids = [], []
        for seq, epoch, nid, body in announced or ():
            ahead = self._ahead_with(nid)
            if seq != cursor or epoch != self._epoch or ahead is None:
                continue
            self._ahead = ahead
            frames.append(announced_frame(cursor, epoch, ahead, body))
            ids.append(nid)
        if not frames:
            return
        await self._write(send, b"".join(frames))
        self._count_announced(ids)

    def _announce_now(self, seq: int, epoch: str, nid: str, body: bytes) -> bool:
        """`Subscriber.announce` for this stream while it waits, idle, at exactly `seq`
        of `epoch`: the notification is shown (or, shown already or past MAX_AHEAD,
        dropped as `_send_announced` drops it) by writing it at once, without waking
        the stream; False when the connection cannot take it now (it is then queued for
        the stream). In a broadcast to 10k streams the wake-ups were most of the hub's
        own work per stream (docs/ARCHITECTURE.md)."""
        ahead = self._ahead_with(nid)
        if ahead is None:
            return True
        assert self._connection is not None
        try:  # in the hub's reader: a failure here must not reach the other streams
            frames = flagged(announced_frame(seq, epoch, ahead, body), self._quiet)
            written = self._connection.write_now(frames)
        except Exception:
            log.exception("stream for %s/%s: an announcement not written", self._tenant, self._user)
            return False  # queued: the stream sends it through ASGI, and ends if it must
        if not written:
            return False
        self._ahead = ahead
        self._sub.last_sent = asyncio.get_running_loop().time()
        self._count_announced((nid,))
        return True

    def _ahead_with(self, nid: str) -> tuple[str, ...] | None:
        """The ids shown ahead once `nid` is shown too; None when it is not to be shown:
        shown already, or MAX_AHEAD are (it waits for its copy)."""
        if nid in self._ahead or len(self._ahead) >= MAX_AHEAD:
            return None
        return (*self._ahead, nid)

    def _count_announced(self, ids: Collection[str]) -> None:
        _child(self._metrics.stream_events_sent_total, "notification").inc(len(ids))
        streamed = self._hub.streamed
        if streamed is not None:
            for nid in ids:
                streamed.sent(nid, self._user)

    async def _catch_up(self, send: Send, cursor: int) -> int:
        """Send every change after `cursor`, in order; a `reset` if the log lost them."""
        if self._ahead:
            self._ahead = fresh_ahead(self._ahead, time.time())
        while True:
            changes, self._prefetched = self._prefetched, None
            if changes is None:
                changes = await self._reader.changes(
                    self._tenant, self._user, cursor, CATCH_UP_BATCH
                )
            lost = self._lost(changes, cursor)
            if lost is not None:
                return await self._reset(send, lost)
            if changes.seq == cursor:
                return cursor
            epoch, ahead = self._epoch, list(self._ahead) if self._ahead else None
            made = [change_frame(c, epoch, ahead) for c in changes.entries]
            if ahead is not None:
                self._ahead = tuple(ahead)
            frames = [f for f in made if f is not None]
            last = changes.entries[-1].entry
            cursor, counts = last.seq, last.counts
            if self._inexact:  # recounted (a `views` change), or synced without one?
                if any(isinstance(c.entry, ViewsChange) for c in changes.entries):
                    self._inexact = EXACT
                else:
                    self._mark(await self._store.position(self._tenant, self._user))
            data = counts_data(
                counts.unread, counts.unseen, counts.total, cursor, counts.views, self._inexact
            )
            frames.append(frame("counts", cursor, epoch, data, self._ahead))
            await self._write(send, b"".join(frames))
            self._count_sent(changes.entries, made)
            if cursor >= changes.seq:  # else the read stopped at its entry or byte budget
                return cursor

    def _lost(self, changes: Changes, cursor: int) -> str | None:
        """Why the client must reload (the reason a `reset` is counted under), or None.

        "epoch": Redis lost the data `cursor` counted in; "ahead": the user's seq is below
        the cursor (lost data, or an id we never issued); "gap": the log no longer holds
        the changes after the cursor."""
        if changes.epoch != self._epoch:
            if cursor:
                return "epoch"
            self._epoch = changes.epoch  # nothing sent yet: every change of it is new
        if cursor > changes.seq:
            return "ahead"
        if cursor < changes.seq and (cursor < changes.oldest_logged - 1 or not changes.entries):
            return "gap"
        return None

    async def _reset(self, send: Send, reason: str) -> int:
        """Send a `reset` with the current counts; the stream goes on from their seq."""
        position = self._mark(await self._position())
        seq, self._epoch = position.seq, position.epoch
        self._ahead = ()  # the client reloads its list
        self._sub.restart(seq)
        data = position_data(position, self._inexact)
        await self._write(send, frame("reset", seq, self._epoch, data))
        self._metrics.stream_events_sent_total.labels(type="reset").inc()
        self._metrics.streams_reset_total.labels(reason=reason).inc()
        return seq

    async def _position(self) -> Position:
        """The user's position for an opening or a reset. Where the tenant has views and
        the user's copy of them is missing (a new user) or older than the tenant's, the
        copy is synced first, as a REST read of counts does: place.lua counts a copy in
        the views the user's copy names, so without it their counts would name no tab
        from their first notification on."""
        position = await self._store.position(self._tenant, self._user)
        if self._synced_position is None or self._tenant_views is None:
            return position
        known = self._tenant_views(self._tenant)
        if known is None or not known.names():
            return position
        if position.personal_views >= 0 and position.tenant_views >= known.version:
            return position
        return await self._synced_position(self._tenant, self._user)

    def _mark(self, position: Position) -> Position:
        """Note which of `position`'s view counts are not exact (as GET /v1/me/counts
        says: the tenant's views, when the user's copy of them is older than the last
        known); without the tenant's views known here, none."""
        known = self._tenant_views(self._tenant) if self._tenant_views is not None else None
        inexact = None
        if known is not None and position.tenant_views < known.version:
            inexact = known.names() & position.counts.views.keys()
        self._inexact = frozenset(inexact) if inexact else EXACT
        return position

    async def _write(self, send: Send, body: bytes) -> None:
        """Send one chunk; the clock cancels a send that outlives the send timeout."""
        sub, loop = self._sub, asyncio.get_running_loop()
        sub.sending_since = loop.time()
        body = flagged(body, self._quiet)
        try:
            await send({"type": "http.response.body", "body": body, "more_body": True})
        except asyncio.CancelledError:
            if not sub.timed_out:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # this cancellation was the timeout, now handled
            raise SendTimeout from None
        finally:
            sub.sending_since = 0.0
            sub.last_sent = loop.time()

    def _count_offered(self, frames: bytes) -> None:
        sent = self._metrics.stream_events_sent_total
        _child(sent, "counts").inc()
        if frames.startswith(b"event: counts"):
            return  # its notification was shown ahead, and counted then
        _child(sent, "notification").inc()
        streamed = self._hub.streamed
        if streamed is not None and (nid := offered_id(frames)) is not None:
            streamed.sent(nid, self._user)

    def _count_sent(self, changes: list[Change], frames: list[bytes | None]) -> None:
        sent = self._metrics.stream_events_sent_total
        for change, written in zip(changes, frames, strict=True):
            if written is not None:
                _child(sent, change.entry.type).inc()
        _child(sent, "counts").inc()
        streamed = self._hub.streamed
        if streamed is None:
            return
        for change, written in zip(changes, frames, strict=True):
            entry = change.entry  # a resurfaced copy's event is not its first: not counted
            if (
                written is not None
                and isinstance(entry, NotificationChange)
                and not entry.resurfaced
            ):
                streamed.sent(entry.id, self._user)


def position_data(position: Position, inexact: Collection[str] = ()) -> dict[str, object]:
    """The data of a `counts` or `reset` event for a user's position (`inexact`: the views
    whose counts are marked `exact: false`)."""
    counts = position.counts
    views = {name: (c.unread, c.unseen, c.total) for name, c in counts.views.items()}
    return counts_data(counts.unread, counts.unseen, counts.total, position.seq, views, inexact)


@functools.lru_cache(maxsize=64)
def _child(counter: Counter, event_type: str) -> Counter:
    """`counter.labels(type=...)`, looked up once (it takes a lock and builds a key)."""
    return counter.labels(type=event_type)
