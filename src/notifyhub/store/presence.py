"""Which users have streams open now, across every hub process: each process reports
its own counts to Redis, and a lookup sums the reports of processes still alive.

Bounded and honest rather than exact. Every `interval_s` a process writes, per user
with a stream open in it, `HSET u{T/U}:streams <process> <count>` (and deletes its
field for users whose streams all closed since its last report), renewing the key's
expiry to `lease_s`; and it stamps itself in the `hubs` zset. A lookup counts only the
fields of processes stamped within `lease_s`. So a count is at most one interval old; a
process that died stops counting after `lease_s` (its fields expire with the key unless
another process renews it, and are ignored meanwhile); the stream path itself writes
nothing, and each report costs one pipeline of two commands per local user.
"""

from __future__ import annotations

import os
import secrets
import socket

from redis.asyncio import Redis

from notifyhub.store.keys import Keys


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
        self._reported: set[str] = set()
        self._withdrawn = False

    async def report(self, local: dict[str, int]) -> None:
        """Publish this process's open streams per user (`T/U` -> count)."""
        if self._withdrawn:
            return
        gone = self._reported - local.keys()
        now_ms = await self._now_ms()
        async with self._redis.pipeline(transaction=False) as pipe:
            for member, count in local.items():
                key = self._keys.streams(member)
                pipe.hset(key, self.process, count)
                pipe.pexpire(key, self._lease_ms)
            for member in gone:
                pipe.hdel(self._keys.streams(member), self.process)
            pipe.zadd(self._keys.hubs, {self.process: now_ms})
            pipe.zremrangebyscore(self._keys.hubs, "-inf", now_ms - 10 * self._lease_ms)
            await pipe.execute()
        self._reported = set(local)

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
