"""One timer for every local stream: keep-alive pings and the send timeout.

An idle stream must send a comment every `ping_s` (proxies drop silent connections),
and a stream whose client stopped reading must end after `send_timeout_s` rather than
hold its buffers forever. With a timer per stream, 10k streams kept 10k timers in the
event loop's heap, re-armed on every wake and every write, and a broadcast paid for
cancelling and re-arming 30k of them. Instead one task ticks a few times per ping
interval and looks at two timestamps per stream:

    tick ──► for each stream: writing for too long? ── expire(): cancel its send
                              quiet for ping_s?      ── ping(): it sends ": ping"

So a ping is late by at most one tick, and a stuck send ends within a tick of its
timeout.
"""

from __future__ import annotations

import asyncio
import contextlib

from notifyhub.realtime.subscriber import Subscriber
from notifyhub.settings import StreamSettings

MAX_TICK_S = 1.0


class StreamClock:
    def __init__(self, settings: StreamSettings) -> None:
        self._settings = settings
        self._subs: set[Subscriber] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, sub: Subscriber) -> None:
        sub.last_sent = asyncio.get_running_loop().time()
        self._subs.add(sub)

    def discard(self, sub: Subscriber) -> None:
        self._subs.discard(sub)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="notifyhub-stream-clock")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            settings = self._settings  # read each time: tests shorten the intervals live
            await asyncio.sleep(min(MAX_TICK_S, settings.ping_s / 4, settings.send_timeout_s / 4))
            self.tick(loop.time())

    def tick(self, now: float) -> None:
        ping_s, send_timeout_s = self._settings.ping_s, self._settings.send_timeout_s
        for sub in self._subs:
            if sub.sending_since:
                if now - sub.sending_since > send_timeout_s and not sub.timed_out:
                    sub.expire()
            elif now - sub.last_sent >= ping_s:
                sub.ping()
