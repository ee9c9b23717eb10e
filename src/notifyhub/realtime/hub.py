"""One Pub/Sub connection per process, fanned out in memory to local streams.

    Redis PUBLISH "T/U seq\\n..."  ──►  Hub._listen (one task, one connection)
      on T/U's shard channel              subscribed to the shards of its streams' users
                                          │ parse lines, look up local subscribers
                                          ▼
                          Subscriber.ring(seq)   (a doorbell, never a queue)
                                          │
                                          ▼
                  stream re-reads the user's change log from its cursor

A doorbell goes to its user's shard channel (store/doorbells.py), and a process
subscribes to a shard's channel while it holds a stream of a user of that shard, plus the
common channel (revocations): `Shards` (realtime/shards.py) keeps the subscriptions, and a
new stream waits for its shard's subscription before its first read (`subscribe_for`).

After any Pub/Sub failure the hub reconnects with backoff, re-subscribes, and rings
every local subscriber with seq 0 so each re-reads from its cursor: whatever was
published during the gap is still in the change log.

On a Redis Cluster the doorbells are sharded channels. The hub asks the cluster which
master serves each channel's slot and opens one connection per master, each read by its
own task; a shard's SSUBSCRIBE goes to its master's:

    CLUSTER SLOTS ──► master A: SSUBSCRIBE <p>events <p>events{5} ...   (one task)
                      master B: SSUBSCRIBE <p>events{1} ...             (one task)

When any of them fails (a master died, or a slot moved and Redis sent an unsolicited
SUNSUBSCRIBE) all are closed, the topology is read again, every channel re-subscribed and
every local stream resynced, as above.

A deferred broadcast's `%` message names no user (store/doorbells.py): the hub takes its
local users of the notification's tenant (on a Cluster, those of the channel it came on),
asks the store which of them are recipients and at which seq (`announce_seqs`: a task and
two round trips per DEFERRED_CHUNK users), and announces it to their streams as it would a
`^` line.

A revocation (store/revocations.py) comes on the same channel: the hub ends the local
streams it concerns (those an API key opened, or a user's opened with tokens issued
before their "not before") and tells `on_revocation` (the key cache, the token check).

Tracing on, a doorbell carrying a publish's trace (store/doorbells.py) is a span of that
trace, and each stream it rings keeps the trace (`traced`, at most TRACES_KEPT) until its
next write, which is a span of the same trace (realtime/sse.py). Off, nothing of this runs
and a trace line is skipped like any line naming no local stream.

A process hears the doorbells of its shards, which hold other processes' users too, and
keeps the lines of its own users. Each message is counted once, after its lines are read:
its bytes and lines, and the share for local streams
(`notifyhub_doorbell_{bytes,lines}_total{local}`, docs/scaling.md "Doorbell fan-in"), so
what a process reads for others' users can be watched as processes are added.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from ulid import ULID

from notifyhub._compat.redis import pubsub_messages
from notifyhub.errors import TooManyStreams
from notifyhub.metrics import Metrics, StreamEnd
from notifyhub.realtime.events import placed_frames
from notifyhub.realtime.shards import SUBSCRIBE_BATCH, Shards
from notifyhub.realtime.subscriber import Subscriber
from notifyhub.store.changes import view_counts
from notifyhub.store.client import close, connect, parse_cluster_url
from notifyhub.store.doorbells import (
    ANNOUNCE_MARK,
    DEFERRED_MARK,
    INLINE_MARK,
    TRACE_MARK,
    Doorbells,
)
from notifyhub.store.keys import member, split_member
from notifyhub.store.revocations import REVOKE_MARK, Revocation
from notifyhub.tracing import Tracing
from notifyhub.turns import SLICE_S, Turns

if TYPE_CHECKING:
    from notifyhub.store.traces import StreamedTally

log = logging.getLogger(__name__)

_POLL_S = 1.0
_IDLE_PING_S = 10.0
_PONG_DEADLINE_S = 5.0
DISPATCH_SLICE_S = SLICE_S
"""The pump hands the loop back after dispatching this long from one read: a read can
hold a fan-out's many messages (store/doorbells.py SHARED_LINES), and other streams and
requests wait while they are dispatched."""
ID_FIELD = b'{"id":"'
"""How an item's JSON starts (the notification model's first field is its id)."""
TRACES_KEPT = 8
"""Traces a stream keeps for its next write: doorbells that coalesce into one write are
its links (the first its parent); more are dropped."""

DEFERRED_CHUNK = 1000
"""Local users per `announce_seqs` call of a deferred broadcast: the calls run at once, and
the streams of the first are written while Redis names the users of the next."""

ANNOUNCED_HERE_KEPT = 1024
"""Deferred broadcasts published through this process whose `%` doorbell it has not
heard yet (a lost one is forgotten after this many more)."""

AnnounceSeqs = Callable[[str, Sequence[str], bool], Awaitable[list[tuple[str, str]]]]
"""(notification id, local users `T/U`, all known recipients) -> (user, `seq-epoch`) of
those a deferred broadcast is to be announced to (store/inbox/announcing.py
`announcement_seqs`)."""


class Hub:
    """Owns the listener task and the map of local subscribers."""

    def __init__(
        self,
        redis_url: str,
        doorbells: Doorbells,
        metrics: Metrics,
        *,
        streams_per_user: int,
        cap_retry_after_s: float = 1.0,
        tracing: Tracing | None = None,
        streamed: StreamedTally | None = None,
        announce_seqs: AnnounceSeqs | None = None,
    ) -> None:
        self._redis_url = redis_url
        self._doorbells = doorbells
        self._metrics = metrics
        self._heard = metrics.doorbells_heard
        self._per_user = streams_per_user
        self._cap_retry_after_s = max(cap_retry_after_s, 1.0)
        """The `Retry-After` of a stream refused at the cap: no time is known when one of
        the user's streams ends, so what the caller asks (at least the 1 s the header
        can say)."""
        self._subs: dict[str, set[Subscriber]] = {}
        self._users_here: dict[str, set[str]] = {}
        """The ids of the users with a stream here, by tenant (`_subs`' keys, split): a
        deferred broadcast's 100,000 ids are matched against them as they are, in C,
        instead of each named `T/U` first (`announce_here`)."""
        self.shards = Shards(doorbells, self._ring_users)
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self.listening = False
        self.client_name = f"notifyhub-pubsub-{doorbells.common}"
        self.tracing = tracing or Tracing()
        self.traced: dict[Subscriber, list[bytes]] = {}
        """Tracing on: the traces of the doorbells that rang a stream since its last write
        (empty when off; the stream takes its own with `traced.pop`)."""
        self.streamed = streamed
        """Routing traces on: where streams count the `notification` events they sent
        (store/traces/); None when off."""
        self.on_revocation: list[Callable[[Revocation], None]] = []
        """Told of every revocation heard (after the streams it ends are closed)."""
        self.on_subscribed: list[Callable[[], None]] = []
        """Told whenever the listener (re)subscribed: it may have missed revocations."""
        self._announce_seqs = announce_seqs
        """Deferred broadcasts are announced to local streams with it; None: not (their
        copies' doorbells still ring the streams)."""
        self._deferred: set[asyncio.Task[None]] = set()
        """Deferred broadcasts being announced (`_announce_deferred`)."""
        self._announced_here: dict[str, None] = {}
        """Deferred broadcasts announced here as they were published (`announce_here`),
        oldest first: their `%` doorbell finds nothing left to do in this process."""

    @property
    def healthy(self) -> bool:
        return self.listening and self._task is not None and not self._task.done()

    @property
    def stream_count(self) -> int:
        return sum(len(s) for s in self._subs.values())

    def local_streams(self) -> dict[str, int]:
        """Streams open in this process, per user (`T/U`)."""
        return {member: len(subs) for member, subs in self._subs.items()}

    async def start(self, ready_timeout_s: float = 5.0) -> None:
        self._task = asyncio.create_task(self._run(), name="notifyhub-hub-listener")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ready_timeout_s):
                await self._subscribed.wait()

    def begin_shutdown(self) -> None:
        """End every local stream (they close cleanly; clients resume elsewhere)."""
        for subs in self._subs.values():
            for sub in subs:
                sub.close()

    async def stop(self) -> None:
        self.begin_shutdown()
        # Cancel until done: a Redis call in flight may swallow one cancellation.
        while self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=1.0)
        self.listening = False
        for task in self._deferred:
            task.cancel()
        await asyncio.gather(*self._deferred, return_exceptions=True)

    def attach(
        self, tenant: str, user: str, *, key_id: str | None = None, issued_at: float | None = None
    ) -> Subscriber:
        """Register a stream for a user, opened by API key `key_id` (an admin tail) or by
        the user's token issued at `issued_at`; refuses past the per-user cap (a 429
        with `Retry-After`)."""
        key = member(tenant, user)
        local = self._subs.setdefault(key, set())
        if len(local) >= self._per_user:
            self._metrics.stream_ended(StreamEnd.CAP)
            raise TooManyStreams(
                f"at most {self._per_user} open streams per user",
                retry_after_s=self._cap_retry_after_s,
            )
        sub = Subscriber(key, key_id=key_id, issued_at=issued_at)
        if not local:
            self._users_here.setdefault(tenant, set()).add(user)
        local.add(sub)
        self.shards.added(key)
        self._metrics.streams_open.inc()
        return sub

    async def subscribe_for(self, sub: Subscriber) -> None:
        """Return once the stream's shard channel is subscribed: its first read comes after
        (realtime/shards.py)."""
        await self.shards.subscribe_for(sub.member)

    def detach(self, sub: Subscriber) -> None:
        local = self._subs.get(sub.member)
        if local is None or sub not in local:
            return
        local.discard(sub)
        self.traced.pop(sub, None)
        if not local:
            del self._subs[sub.member]
            tenant, user = split_member(sub.member)
            users = self._users_here.get(tenant)
            if users is not None:
                users.discard(user)
                if not users:
                    del self._users_here[tenant]
        self.shards.removed(sub.member)
        self._metrics.streams_open.dec()

    def dispatch(self, payload: bytes) -> None:
        """Ring the local subscribers named in one doorbell message (store/doorbells.py);
        a fan-out's message carries its notification, and the users'
        copies' events are built here, once per user with a local stream, and offered to
        those streams. Each message is counted once (`DoorbellsHeard.read`): what came,
        what was ours."""
        size = len(payload)
        body = None
        if payload[:1] == ANNOUNCE_MARK:
            self._announce(payload, size)
            return
        if payload[:1] == DEFERRED_MARK:
            self._deferred_broadcast(payload[1:], size)
            return
        if payload[:1] == REVOKE_MARK:
            self._heard.read(size, 0, 0, 0)
            self._revoke(payload)
            return
        if payload[:1] == INLINE_MARK:
            head, _, payload = payload.partition(b"\n")
            body = head[1:]
        if self.tracing.enabled and payload[:1] == TRACE_MARK:
            head, _, payload = payload.partition(b"\n")
            self._traced_dispatch(head[1:], body, payload, size)
        else:
            self._ring(body, payload, None, size)

    def _traced_dispatch(self, trace: bytes, body: bytes | None, payload: bytes, size: int) -> None:
        """`_ring` as a span of the publish's trace; the streams rung keep this span's
        context, their next write's parent."""
        with self.tracing.span("notifyhub.doorbell", kind="consumer", parent=trace) as span:
            rung: list[Subscriber] = []
            self._ring(body, payload, rung, size)
            span.set_attribute("notifyhub.streams_rung", len(rung))
            trace = self.tracing.traceparent() or trace
        for sub in rung:
            kept = self.traced.setdefault(sub, [])
            if len(kept) < TRACES_KEPT:
                kept.append(trace)

    def _ring(
        self, body: bytes | None, payload: bytes, rung: list[Subscriber] | None, size: int
    ) -> None:
        """Ring (or offer the copy to) the streams of each line's user; adds them to
        `rung` if given. `size`: the whole message's bytes, `payload` its lines."""
        offered = False
        for subs, seq in self._local_lines(payload, size):
            if body is not None and "," in seq:
                offered = True
                n, unread, unseen, total, *rest = seq.split(",", 5)
                epoch = sys.intern(rest[0]) if rest else ""  # streams keep it: one copy
                views = view_counts(*rest[1].split(":", 1)) if len(rest) > 1 else None
                counts = int(unread), int(unseen), int(total)
                frames = placed_frames(body, int(n), epoch, *counts, views)
                for sub in subs:
                    sub.offer(int(n), epoch, frames)
            else:
                for sub in subs:
                    sub.ring(int(seq) if seq.isdigit() else 0)
            if rung is not None:
                rung.extend(subs)
        if offered and body is not None:
            self._observe_latency(body)

    def _local_lines(self, payload: bytes, size: int) -> Iterator[tuple[set[Subscriber], str]]:
        """The local streams of each doorbell line's user who has any here, with the rest
        of the line (`tenant/user <rest>`). Once every line is read, counts the message
        (`size` bytes in all, `payload` its lines after any header): the lines and bytes
        for local streams, plus the header when any line was; two additions per local
        line, the rest once per message."""
        subs_of = self._subs.get
        lines = payload.split(b"\n")
        local = local_bytes = 0
        for line in lines:
            name, _, rest = line.decode(errors="replace").rpartition(" ")
            subs = subs_of(name)
            if subs:
                local += 1
                local_bytes += len(line)
                yield subs, rest
        if local:  # the header and the local lines' newlines were for local streams too
            local_bytes = min(size, local_bytes + local + size - len(payload))
        self._heard.read(size, local_bytes, len(lines), local)

    def _announce(self, payload: bytes, size: int) -> None:
        """Hand a broadcast's notification, announced before its copies are written, to
        the local streams of each line's user (`Subscriber.announce` keeps it only for a
        stream that has sent exactly the seq the line names)."""
        head, _, payload = payload.partition(b"\n")
        body = head[1:]
        if body[:7] != ID_FIELD:
            self._heard.read(size, 0, 0, 0)
            return
        nid = body[7:33].decode()
        local = False
        for subs, at in self._local_lines(payload, size):
            local = _announce_to(subs, at, nid, body) or local
        if local:
            self._observe_latency(body)

    def _deferred_broadcast(self, body: bytes, size: int) -> None:
        """A deferred broadcast's notification (`%`, no user lines, on the common
        channel): announced to the local streams of its recipients (`_announce_chunks`:
        the store asks the index about each local user of its tenant), unless it was
        published, and so announced, here. Counted as local when any stream here was a
        candidate."""
        members = self._candidates(body) if self._announce_seqs is not None else []
        self._heard.read(size, size if members else 0, 0, 0)
        nid = body[7:33].decode()
        if nid in self._announced_here:  # published here, and announced as it was
            del self._announced_here[nid]
            return
        self._announce_chunks(nid, body, members, known=False)

    def announce_here(
        self, nid: str, body: bytes, tenant: str, ids: Sequence[str]
    ) -> Awaitable[Any] | None:
        """A deferred broadcast being published through this process (store/inbox/
        announcing.py `announce_deferred`) to users `ids` of `tenant`: None when none of
        them has a stream here; else its announcement to those streams, under way
        (`_announce_chunks`, the recipients known: no index to ask, no doorbell to wait
        for) while the caller writes the index and the `%` doorbell, which this process
        will then leave."""
        here = self._users_here.get(tenant)
        if self._announce_seqs is None or not here:  # no scan of the recipients
            return None
        local = [member(tenant, user) for user in filter(here.__contains__, ids)]  # (C)
        if not local:
            return None
        self._announced_here[nid] = None
        while len(self._announced_here) > ANNOUNCED_HERE_KEPT:
            del self._announced_here[next(iter(self._announced_here))]
        return asyncio.gather(*self._announce_chunks(nid, body, local, known=True))

    def _announce_chunks(
        self, nid: str, body: bytes, members: list[str], *, known: bool
    ) -> list[asyncio.Task[None]]:
        """Announce deferred broadcast `nid` to the streams of `members` (all recipients
        when `known`), a task per DEFERRED_CHUNK of them: each chunk's streams are written
        while Redis names the users of the next."""
        tasks = []
        for start in range(0, len(members), DEFERRED_CHUNK):
            chunk = members[start : start + DEFERRED_CHUNK]
            task = asyncio.create_task(self._announce_deferred(nid, body, chunk, known))
            self._deferred.add(task)
            task.add_done_callback(self._deferred.discard)
            tasks.append(task)
        return tasks

    def _candidates(self, body: bytes) -> list[str]:
        """The local users (`T/U`) of the tenant of notification `body`."""
        if body[:7] != ID_FIELD:
            return []
        try:
            tenant = orjson.loads(body)["tenant"]
            users = self._users_here.get(tenant, ())
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return []
        return [member(tenant, user) for user in users]

    async def _announce_deferred(
        self, nid: str, body: bytes, members: list[str], known: bool
    ) -> None:
        """Announce a deferred broadcast to the streams of those of `members` the store
        names with their seqs. A failure is logged: the copies' doorbells still come."""
        assert self._announce_seqs is not None
        try:
            named = await self._announce_seqs(nid, members, known)
        except (RedisError, OSError) as exc:
            log.warning("deferred broadcast %s not announced here: %s", nid, exc)
            return
        local = False
        for user, at in named:
            subs = self._subs.get(user)
            if subs:
                local = _announce_to(subs, at, nid, body) or local
        if local:
            self._observe_latency(body)

    def _revoke(self, payload: bytes) -> None:
        revocation = Revocation.parse(payload)
        if revocation is not None:
            self.revoke(revocation)

    def revoke(self, revocation: Revocation) -> None:
        """End the local streams a revocation concerns, then tell `on_revocation`."""
        ended = self._revoked_streams(revocation)
        for sub in ended:
            sub.close()
        if ended:
            log.info("revocation ended %d local streams", len(ended))
        for hook in self.on_revocation:
            try:
                hook(revocation)
            except Exception:  # the listener must go on whatever a hook does
                log.exception("revocation hook failed")

    def tail_keys(self) -> set[str]:
        """The API keys that opened local streams (admin tails)."""
        return {s.key_id for subs in self._subs.values() for s in subs if s.key_id is not None}

    def _revoked_streams(self, revocation: Revocation) -> list[Subscriber]:
        """The local streams a key opened, or a user's opened with a token issued at or
        before their "not before" (admin tails of the user stay: a key opened them)."""
        if revocation.key_id is not None:
            key_id = revocation.key_id
            return [s for subs in self._subs.values() for s in subs if s.key_id == key_id]
        not_before_s = revocation.not_before_ms / 1000
        return [
            s
            for s in self._subs.get(revocation.member or "", ())
            if s.key_id is None and (s.issued_at is None or s.issued_at <= not_before_s)
        ]

    def _observe_latency(self, body: bytes) -> None:
        """Publish-to-stream time of an inline doorbell's notification: its id (the item
        JSON's first field) is a ULID of its acceptance's millisecond."""
        if body[:7] == ID_FIELD:
            try:
                accepted_ms = ULID.from_str(body[7:33].decode()).milliseconds
            except ValueError:
                return
            latency_s = max(time.time() - accepted_ms / 1000, 0.0)
            self._metrics.publish_to_stream_seconds.observe(latency_s)

    def _ring_users(self, users: Iterable[str]) -> None:
        """Make the local streams of `users` (`T/U`) re-read from their cursors."""
        for user in users:
            for sub in self._subs.get(user, ()):
                sub.ring(0)

    def resync_all(self) -> None:
        """Make every local stream re-read from its cursor: after a Pub/Sub gap, or when
        Redis lost data (services/epoch.py EpochWatch): a stream whose user's seq is now
        below its cursor, or of another epoch, then sends one `reset` (realtime/sse.py)."""
        for subs in self._subs.values():
            for sub in subs:
                sub.ring(0)

    async def _run(self) -> None:
        backoff_s = 0.1
        while True:
            try:
                if self._doorbells.sharded:
                    await self._listen_sharded()
                else:
                    await self._listen_plain()
            except (RedisError, OSError) as exc:
                log.warning("pubsub connection lost (%s); reconnecting in %.1fs", exc, backoff_s)
            finally:
                self.listening = False
            self._metrics.pubsub_reconnects_total.inc()
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, 5.0)

    def _client(self, url: str) -> Redis:
        return connect(url, retry=Retry(NoBackoff(), 0), client_name=self.client_name)

    async def _listen_plain(self) -> None:
        client = self._client(self._redis_url)
        try:
            async with client.pubsub() as pubsub:
                await self.shards.connect(PlainRoute(pubsub))
                self._listening()
                await self._pump(pubsub)
        finally:
            self.shards.disconnected()
            await close(client)

    async def _listen_sharded(self) -> None:
        """One connection per master serving a doorbell channel, one task each."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                pubsubs, by_channel = [], dict[str, PubSub]()
                for url, channels in (await self._shard_masters()).items():
                    client = self._client(url)
                    stack.push_async_callback(client.aclose)
                    pubsub = await stack.enter_async_context(client.pubsub())
                    await pubsub.connect()  # read from before it subscribes anything
                    pubsubs.append(pubsub)
                    by_channel |= dict.fromkeys(channels, pubsub)
                await self.shards.connect(ShardedRoute(by_channel))
                self._listening()
                await _first_failure([self._pump(pubsub) for pubsub in pubsubs])
        finally:
            self.shards.disconnected()

    async def _shard_masters(self) -> dict[str, list[str]]:
        """A `redis://` URL per master serving a doorbell channel, with its channels."""
        cluster = parse_cluster_url(self._redis_url)
        assert cluster is not None
        topology = self._client(self._redis_url)
        try:
            await topology.initialize()
            by_node: dict[str, list[str]] = {}
            for channel in [self._doorbells.common, *self._doorbells.channels]:
                node = topology.get_node_from_key(channel)  # type: ignore[attr-defined]
                by_node.setdefault(cluster.node_url(node.host, node.port), []).append(channel)
            return by_node
        finally:
            await topology.aclose()

    def _listening(self) -> None:
        self.listening = True
        self._subscribed.set()
        self.resync_all()
        for hook in self.on_subscribed:
            hook()

    async def _pump(self, pubsub: PubSub) -> None:
        """Read messages; UNSUBSCRIBE idle shards each time it wakes; PING when idle and
        give up on a connection that stays silent."""
        messages = pubsub_messages(pubsub)
        last_heard = time.monotonic()
        ping_sent: float | None = None
        while True:
            replies = await messages.read(_POLL_S)
            now = time.monotonic()
            await self.shards.unsubscribe_idle()
            if replies:
                last_heard, ping_sent = now, None
                await self._on_replies(replies)
            elif ping_sent is not None and now - ping_sent > _PONG_DEADLINE_S:
                raise RedisConnectionError("pubsub connection did not answer PING")
            elif ping_sent is None and now - last_heard > _IDLE_PING_S:
                await pubsub.ping()
                ping_sent = now

    async def _on_replies(self, replies: list[Any]) -> None:
        """`_on_reply` for each of one read's replies, in order, handing the loop back
        every DISPATCH_SLICE_S."""
        turns = Turns(DISPATCH_SLICE_S)
        for reply in replies:
            self._on_reply(reply)
            await turns.take()

    def _on_reply(self, reply: Any) -> None:
        """One reply of the subscribed connection: a doorbell is dispatched; a subscription
        confirmed is told to `shards`; a shard channel unsubscribed by the server, not by
        the hub (its slot moved), ends the connection; PONGs only say it is alive."""
        if not isinstance(reply, list) or len(reply) < 3:
            return
        kind = reply[0]
        if kind == b"message" or kind == b"smessage":
            self.dispatch(reply[2])
        elif kind == b"subscribe" or kind == b"ssubscribe":
            self.shards.confirmed(reply[1].decode())
        elif kind == b"unsubscribe":
            self.shards.expected_unsubscribe(reply[1].decode())
        elif kind == b"sunsubscribe" and not self.shards.expected_unsubscribe(reply[1].decode()):
            raise RedisConnectionError(f"shard channel {reply[1]!r} moved")


class PlainRoute:
    """SUBSCRIBE / UNSUBSCRIBE on the one connection (standalone Redis, Sentinel)."""

    def __init__(self, pubsub: PubSub) -> None:
        self._pubsub = pubsub

    async def subscribe(self, channels: Sequence[str]) -> None:
        for start in range(0, len(channels), SUBSCRIBE_BATCH):
            await self._pubsub.subscribe(*channels[start : start + SUBSCRIBE_BATCH])

    async def unsubscribe(self, channels: Sequence[str]) -> None:
        for start in range(0, len(channels), SUBSCRIBE_BATCH):
            await self._pubsub.unsubscribe(*channels[start : start + SUBSCRIBE_BATCH])


class ShardedRoute:
    """SSUBSCRIBE / SUNSUBSCRIBE, one channel per command (a command refuses CROSSSLOT),
    on the connection to the master serving its slot (a Cluster)."""

    def __init__(self, by_channel: dict[str, PubSub]) -> None:
        self._by_channel = by_channel

    async def subscribe(self, channels: Sequence[str]) -> None:
        for channel in channels:
            await self._by_channel[channel].ssubscribe(channel)

    async def unsubscribe(self, channels: Sequence[str]) -> None:
        for channel in channels:
            await self._by_channel[channel].sunsubscribe(channel)


def _announce_to(subs: set[Subscriber], at: str, nid: str, body: bytes) -> bool:
    """Announce notification `nid` (item JSON `body`) to `subs`, as of the user's `at`
    (`seq-epoch`); False when `at` is no seq."""
    seq, _, epoch = at.partition("-")
    if not (seq.isascii() and seq.isdigit()):
        return False
    for sub in subs:
        sub.announce(int(seq), epoch, nid, body)
    return True


async def _first_failure(pumps: list[Coroutine[Any, Any, None]]) -> None:
    """Run the pumps until one fails; cancel the others and raise its error."""
    tasks = [asyncio.create_task(pump) for pump in pumps]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
