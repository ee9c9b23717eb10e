"""Idempotency-Key records: the first request's id, body hash and, once done, response."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson
from redis.asyncio import Redis

from notifyhub.errors import IdempotencyMismatch
from notifyhub.store.keys import Keys
from notifyhub.store.lock import DELETE_IF_HOLDS


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    body_sha: str
    notification_id: str
    created_ms: int
    response: dict[str, Any] | None = None


class IdempotencyStore:
    """`SET NX` claims a key; a repeat reuses the first id, so a retry fills gaps only."""

    def __init__(self, redis: Redis, keys: Keys, ttl_s: int) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl_s = ttl_s
        self._release = redis.register_script(DELETE_IF_HOLDS)

    def _key(self, tenant: str, key: str) -> str:
        return self._keys.idempotency(tenant, hashlib.sha256(key.encode()).hexdigest())

    async def begin(self, tenant: str, key: str, fresh: IdempotencyRecord) -> IdempotencyRecord:
        """Claim `key` with `fresh`, or return the earlier record for the same body."""
        name = self._key(tenant, key)
        if await self._redis.set(name, _dump(fresh), nx=True, ex=self._ttl_s):
            return fresh
        raw = await self._redis.get(name)
        if raw is None:  # expired between the two calls: claim it again
            return await self.begin(tenant, key, fresh)
        earlier = IdempotencyRecord(**orjson.loads(raw))
        if earlier.body_sha != fresh.body_sha:
            raise IdempotencyMismatch("this Idempotency-Key was used with a different request body")
        return earlier

    async def finish(self, tenant: str, key: str, record: IdempotencyRecord) -> None:
        """Record the answer. A key gone meanwhile (a refused request with the same body
        released its claim while this one went on) is claimed again with it: a retry gets
        this answer, never a second publish."""
        name = self._key(tenant, key)
        if not await self._redis.set(name, _dump(record), xx=True, keepttl=True):
            await self._redis.set(name, _dump(record), nx=True, ex=self._ttl_s)

    async def release(self, tenant: str, key: str, claim: IdempotencyRecord) -> bool:
        """Free `key` if it still holds `claim` unanswered, for a request refused before it
        wrote anything: its corrected retry may use the key. An answer recorded, or another
        request's claim, stays. False if nothing was freed."""
        return bool(await self._release(keys=[self._key(tenant, key)], args=[_dump(claim)]))


def _dump(record: IdempotencyRecord) -> bytes:
    return orjson.dumps(
        {
            "body_sha": record.body_sha,
            "notification_id": record.notification_id,
            "created_ms": record.created_ms,
            "response": record.response,
        }
    )
