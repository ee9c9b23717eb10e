"""Which users have streams open now, across every hub process: each process reports
its own counts to Redis, and a lookup sums the reports of processes still alive.

Bounded and honest rather than exact. Every `interval_s` a process stamps itself in the
`hubs` zset and writes what changed since its last report: `HSET u{T/U}:streams
<process> <count>` for a user whose count changed, `HDEL` for a user whose streams all
closed. A lookup counts only the fields of processes stamped within `lease_s` (three
intervals). So a count is at most one interval old, and a process that died stops
counting after `lease_s`. The stream path itself writes nothing; a report costs two
commands per user whose count changed, and every `KEY_TTL_S / 2` two per user with a
stream open here, renewing the keys' expiry: a dead process's fields, ignored at once,
are gone with their key within `KEY_TTL_S` unless a live process keeps it. A report of
many users (a reconnect storm changes thousands in one interval) is written in slices
of REPORT_SLICE users, taking the loop's turns between them (notifyhub/turns.py).
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from functools import partial
from typing import Any

from redis.asyncio import Redis

from notifyhub.store.keys import Keys
from notifyhub.store.scripts import pipelined_each
from notifyhub.turns import sliced

KEY_TTL_S = 3600.0
"""How long a user's report key lives unless renewed (each reporting process renews the
keys of its users every half of it)."""

REPORT_SLICE = 100
"""Users per pipeline of a report. Thousands in one (a reconnect storm's interval) held
the event loop while their commands were packed, every stream and request waiting
(docs/scaling.md, "Design notes")."""


def process_id() -> str:
    """This process's name in the reports: host, pid and a random part (pids recycle)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class StreamPresence:
    def __init__(
        self, redis: Redis, keys: Keys, *, lease_s: float, process: str | None = None
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._lease_ms = int(lease_s * 1000)
        self.process = process or process_id()
        self._reported: dict[str, int] = {}
        self._renewed_at = float("-inf")
        self._withdrawn = False

    async def report(self, local: dict[str, int]) -> None:
        """Publish this process's open streams per user (`T/U` -> count)."""
        if self._withdrawn:
            return
        renew = time.monotonic() - self._renewed_at >= KEY_TTL_S / 2
        changed = {m: n for m, n in local.items() if renew or self._reported.get(m) != n}
        gone = self._reported.keys() - local.keys()
        await pipelined_each(self._redis, self._writes(list(changed.items()), list(gone)))
        now_ms = await self._now_ms()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zadd(self._keys.hubs, {self.process: now_ms})
            pipe.zremrangebyscore(self._keys.hubs, "-inf", now_ms - 10 * self._lease_ms)
            replies = await pipe.execute()
        self._reported = dict(local)
        if renew:
            self._renewed_at = time.monotonic()
        if replies[0] and not renew:  # our stamp was gone: Redis lost data; all again
            self._renewed_at = float("-inf")

    async def _writes(
        self, changed: list[tuple[str, int]], gone: list[str]
    ) -> AsyncGenerator[Callable[[Any], None]]:
        """A report's writes, a pipeline's build per slice of users."""
        async for part in sliced(changed, REPORT_SLICE):
            yield partial(self._queue_counts, part)
        async for gone_part in sliced(gone, REPORT_SLICE):
            yield partial(self._queue_gone, gone_part)

    def _queue_counts(self, part: Sequence[tuple[str, int]], pipe: Any) -> None:
        for member, count in part:
            key = self._keys.streams(member)
            pipe.hset(key, self.process, count)
            pipe.expire(key, int(KEY_TTL_S))

    def _queue_gone(self, part: Sequence[str], pipe: Any) -> None:
        for member in part:
            pipe.hdel(self._keys.streams(member), self.process)

    async def withdraw(self) -> None:
        """Take this process's reports back (on a clean shutdown)."""
        await self.report({})
        self._withdrawn = True
        await self._redis.zrem(self._keys.hubs, self.process)

    async def count(self, member: str) -> int:
        """User `T/U`'s streams open in live processes, as of their last reports."""
        found = await self._redis.hgetall(self._keys.streams(member))
        if not found:
            return 0
        processes = [p.decode() if isinstance(p, bytes) else p for p in found]
        counts = list(found.values())
        stamps = await self._redis.zmscore(self._keys.hubs, processes)
        alive_after = await self._now_ms() - self._lease_ms
        return sum(
            int(n)
            for n, stamp in zip(counts, stamps, strict=True)
            if stamp is not None and stamp >= alive_after
        )

    async def _now_ms(self) -> int:
        """Redis's clock, so processes with skewed clocks agree on who is alive."""
        seconds, micros = await self._redis.time()
        return int(seconds) * 1000 + int(micros) // 1000
