"""The doorbell shard channels a hub process listens to: those of its local streams' users.

    Hub.attach(T/U)        streams[channel of T/U] += 1
    subscribe_for(T/U)     a shard's first stream: SUBSCRIBE its channel (one command for
                           all of a tick's) and wait for Redis' confirmation before the
                           stream's first read, as a resume does: whatever changes after
                           that read rings a channel already heard
    Hub.detach(T/U)        streams[channel] -= 1; at 0 the channel is idle
    unsubscribe_idle()     the listener, each time it wakes: UNSUBSCRIBE the channels idle
                           for IDLE_S (a stream that reconnects at once finds its shard
                           still subscribed: a reconnect storm is not a SUBSCRIBE each)

Commands go out one at a time (a lock), each deciding from the state it finds, so Redis
sees them in the order the state changed: an UNSUBSCRIBE sent before a SUBSCRIBE of the
same channel is confirmed before it. While no connection is up nothing is sent: the
listener subscribes every channel with a stream when it connects, then rings every stream
(realtime/hub.py), which covers the streams opened meanwhile. A stream that gave up
waiting (`CONFIRM_TIMEOUT_S`) is rung when its channel's confirmation comes.

On a Cluster the commands are SSUBSCRIBE / SUNSUBSCRIBE, one channel each, on the
connection to the master serving the channel's slot; an SUNSUBSCRIBE the hub did not
send means the slot moved (`expected_unsubscribe` is False).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from redis.exceptions import RedisError

from notifyhub.store.coalesce import Coalescer
from notifyhub.store.doorbells import Doorbells

CONFIRM_TIMEOUT_S = 2.0
"""How long a new stream waits for its channel's subscription before its first read."""
IDLE_S = 10.0
"""How long a channel stays subscribed after its last stream left."""
SUBSCRIBE_BATCH = 1000
"""Channels per SUBSCRIBE command (a reconnect storm opens thousands of shards at once)."""


class Route(Protocol):
    """The subscribed connection(s) of the listener: where (un)subscribe commands go."""

    async def subscribe(self, channels: Sequence[str]) -> None: ...

    async def unsubscribe(self, channels: Sequence[str]) -> None: ...


class Shards:
    """Counts the local streams per shard channel and keeps the subscriptions to match."""

    def __init__(self, doorbells: Doorbells, ring: Callable[[Iterable[str]], None]) -> None:
        self._doorbells = doorbells
        self._ring = ring
        """Rings the local streams of users (their channel's subscription came after they
        read)."""
        self._streams: dict[str, dict[str, int]] = {}
        """Per channel with local streams: its users' (`T/U`) streams."""
        self._live: set[str] = set()
        """Subscribed on the current connection(s), confirmed or sent with the connection."""
        self._pending: dict[str, asyncio.Future[None]] = {}
        """SUBSCRIBEs sent (or about to be) and not confirmed yet."""
        self._idle: dict[str, float] = {}
        """Channels without a stream: since when (monotonic seconds), oldest first."""
        self._late: set[str] = set()
        """Pending channels a stream stopped waiting for: rung once confirmed."""
        self._unsubscribing: dict[str, int] = {}
        """UNSUBSCRIBE confirmations still to come, per channel."""
        self._route: Route | None = None
        self._lock = asyncio.Lock()
        self._send: Coalescer[str, None] = Coalescer(self._subscribe, max_batch=SUBSCRIBE_BATCH)

    @property
    def subscribed(self) -> frozenset[str]:
        """The shard channels subscribed now (confirmed or sent with the connection)."""
        return frozenset(self._live)

    def channel_of(self, member: str) -> str:
        return self._doorbells.channel_of(member)

    def added(self, member: str) -> None:
        """A stream of user `T/U` attached."""
        channel = self.channel_of(member)
        users = self._streams.setdefault(channel, {})
        users[member] = users.get(member, 0) + 1
        self._idle.pop(channel, None)

    def removed(self, member: str) -> None:
        """A stream of user `T/U` detached; its channel idles once it has none."""
        channel = self.channel_of(member)
        users = self._streams.get(channel, {})
        left = users.get(member, 0) - 1
        if left > 0:
            users[member] = left
            return
        users.pop(member, None)
        if not users:
            self._streams.pop(channel, None)
            self._idled(channel)

    def _idled(self, channel: str) -> None:
        if channel != self._doorbells.common:
            self._idle.pop(channel, None)  # to the end: the dict stays oldest first
            self._idle[channel] = time.monotonic()

    async def subscribe_for(self, member: str) -> None:
        """Return once user `T/U`'s channel is subscribed (at once while disconnected: the
        listener's connection subscribes it, then rings the stream)."""
        channel = self.channel_of(member)
        if channel in self._live or self._route is None:
            return
        future = self._pending.get(channel)
        try:
            async with asyncio.timeout(CONFIRM_TIMEOUT_S):
                if future is None:
                    future = asyncio.get_running_loop().create_future()
                    self._pending[channel] = future
                    await asyncio.shield(self._send(channel))  # sent even if we stop waiting
                await asyncio.shield(future)
        except TimeoutError:
            self._late.add(channel)

    async def _subscribe(self, channels: list[str]) -> list[None]:
        """Send one SUBSCRIBE for the pending channels of a tick (`_send`). A failed send
        is the connection's failure: the listener reconnects and subscribes them."""
        async with self._lock:
            route = self._route
            wanted = [c for c in dict.fromkeys(channels) if c in self._pending]
            if route is not None and wanted:
                with contextlib.suppress(RedisError, OSError):
                    await route.subscribe(wanted)
        return [None] * len(channels)

    def confirmed(self, channel: str) -> None:
        """Redis confirmed a SUBSCRIBE of `channel` on the current connection."""
        future = self._pending.pop(channel, None)
        if future is None:
            return
        self._live.add(channel)
        if not future.done():
            future.set_result(None)
        if channel in self._late:
            self._late.discard(channel)
            self._ring(self._streams.get(channel, {}))
        if channel not in self._streams:
            self._idled(channel)

    def expected_unsubscribe(self, channel: str) -> bool:
        """Whether an UNSUBSCRIBE confirmation of `channel` answers one the hub sent."""
        left = self._unsubscribing.get(channel, 0)
        if not left:
            return False
        if left == 1:
            del self._unsubscribing[channel]
        else:
            self._unsubscribing[channel] = left - 1
        return True

    async def unsubscribe_idle(self) -> None:
        """UNSUBSCRIBE the live channels that have had no stream for IDLE_S."""
        if not self._idle:
            return
        since = time.monotonic() - IDLE_S
        if next(iter(self._idle.values())) > since:
            return
        async with self._lock:
            done = list(itertools.takewhile(lambda c: self._idle[c] <= since, self._idle))
            for channel in done:
                del self._idle[channel]
            idle = [c for c in done if c in self._live and c not in self._streams]
            if self._route is None or not idle:
                return
            self._live.difference_update(idle)
            for channel in idle:
                self._unsubscribing[channel] = self._unsubscribing.get(channel, 0) + 1
            await self._route.unsubscribe(idle)

    def wanted(self) -> list[str]:
        """Every channel to subscribe on a new connection: the common one and those of the
        local streams."""
        common = self._doorbells.common
        return [common, *(c for c in self._streams if c != common)]

    async def connect(self, route: Route) -> None:
        """Subscribe a new connection to `wanted`: those are live, and their waits end (the
        listener rings every stream next). A stream attaching meanwhile waits for its own
        SUBSCRIBE, sent after these."""
        async with self._lock:
            self._route = route
            self._late.clear()
            self._unsubscribing.clear()
            self._idle.clear()
            channels, before = self.wanted(), list(self._pending)
            await route.subscribe(channels)
            self._live = set(channels)
            for channel in before:  # subscribed now, or its streams left
                future = self._pending.pop(channel)
                if not future.done():
                    future.set_result(None)

    def disconnected(self) -> None:
        self._route = None
        self._live.clear()
