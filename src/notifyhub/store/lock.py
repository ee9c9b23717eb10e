"""A token-checked Redis lock (SET NX PX) that saves duplicate work between processes."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis

DELETE_IF_HOLDS = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
"""Delete KEYS[1] only while it holds ARGV[1] (1 if deleted): a lock's release, an
idempotency claim's."""
_EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


class RedisLock:
    """One holder at a time per key, until release or `ttl_ms` passes.

    The lock only saves duplicate work: every step it guards is idempotent and atomic
    on its own, so two holders at once (a paused process whose lock expired, a failover
    that lost the key) cost work, never correctness. Hence no Redlock. Release and
    extend check this instance's random token, so a holder whose lock expired cannot
    free or prolong the next holder's lock.
    """

    def __init__(self, redis: Redis, key: str, ttl_ms: int) -> None:
        self._redis = redis
        self._key = key
        self._ttl_ms = ttl_ms
        self._token = secrets.token_hex(16)
        self._release = redis.register_script(DELETE_IF_HOLDS)
        self._extend = redis.register_script(_EXTEND)

    async def acquire(self) -> bool:
        return bool(await self._redis.set(self._key, self._token, nx=True, px=self._ttl_ms))

    async def release(self) -> bool:
        """Free the lock if this instance still holds it; False if it had expired."""
        return bool(await self._release(keys=[self._key], args=[self._token]))

    async def extend(self) -> bool:
        """Restart the lock's `ttl_ms` if this instance still holds it."""
        return bool(await self._extend(keys=[self._key], args=[self._token, self._ttl_ms]))

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[bool]:
        """Yield whether the lock was taken; release it on exit if so."""
        held = await self.acquire()
        try:
            yield held
        finally:
            if held:
                await self.release()
