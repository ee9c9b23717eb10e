"""Per-API-key and per-user token buckets in Redis, one atomic script per check.

A busy bucket is not asked on every request: a process takes a small lease of tokens
(about `LEASE_S` worth of the bucket's rate) in one call and spends it locally until it
runs out or goes stale. Tokens leave the shared bucket before they are spent, so every
process together never admits more than the bucket allows; a lease that goes stale
unspent is simply lost (the limit errs on the strict side, by at most one lease per
process). Only one request per bucket and process asks Redis at a time; concurrent ones
wait for its lease. Buckets whose lease would be one token are asked on every request.

Asks go to Redis one call at a time, and those made while a call is out go together in
the next pipeline (store/coalesce.py): a reconnect storm opens thousands of streams, each
asking its own user's bucket, mostly one per event-loop tick, and a script call each
would cost the hub more than the streams' own work.

While Redis is unavailable the limiter admits (fails open): rate limiting is not worth a
503 from endpoints that need only PostgreSQL (deliveries, admin), and those that need
Redis answer 503 by themselves. A check gives Redis `ASK_BUDGET_S` (and the call ahead of
it as long); after a failure the limiter admits without asking for `OPEN_S`, so an outage
costs the requests then waiting that budget, or twice it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from redis.asyncio import Redis

from notifyhub.domain.auth import ServicePrincipal, UserPrincipal
from notifyhub.errors import TooManyRequests
from notifyhub.outages import outage_of
from notifyhub.settings import RateLimits
from notifyhub.store.coalesce import Coalescer
from notifyhub.store.keys import Keys, member
from notifyhub.store.scripts import pipelined, queue_script

log = logging.getLogger(__name__)

LEASE_S = 0.02
"""A lease holds this many seconds' worth of a bucket's rate (at most its burst)."""
LEASE_TTL_S = 0.25
"""Unspent leased tokens are dropped after this long (they were taken from the bucket)."""
MAX_LEASES = 10_000
"""Past this many buckets with a lease, stale leases are swept before adding one."""
ASK_BUDGET_S = 0.5
"""How long a check waits for Redis before admitting the request unchecked."""
OPEN_S = 1.0
"""After Redis failed a check, requests are admitted without asking it for this long."""


@dataclass(slots=True)
class _Lease:
    tokens: int
    stale_at: float


@dataclass(frozen=True, slots=True)
class _Ask:
    bucket: str
    rate_per_s: float
    burst: int
    want: int


class RateLimiter:
    """Admits or refuses one request against a bucket; a rate of 0 turns a limit off."""

    def __init__(self, redis: Redis, keys: Keys, limits: RateLimits) -> None:
        self._keys = keys
        self._limits = limits
        source = (files("notifyhub.store") / "lua" / "ratelimit.lua").read_text(encoding="utf-8")
        self._redis = redis
        self._script = redis.register_script(source)
        self._asks: Coalescer[_Ask, tuple[int, int]] = Coalescer(self._ask_many, max_in_flight=1)
        self._leases: dict[str, _Lease] = {}
        self._asking: dict[str, asyncio.Future[None]] = {}
        """Buckets whose lease is being fetched, and the future their waiters await."""
        self._unchecked_until = 0.0
        """Monotonic time until which requests are admitted without asking Redis."""

    async def check_key(self, principal: ServicePrincipal) -> None:
        limits = self._limits
        bucket = self._keys.rate_limit("key", principal.key_id)
        await self._take(bucket, limits.per_key_per_s, limits.per_key_burst, "this API key")

    async def check_user(self, principal: UserPrincipal) -> None:
        limits = self._limits
        bucket = self._keys.rate_limit("user", member(principal.tenant, principal.user))
        await self._take(bucket, limits.per_user_per_s, limits.per_user_burst, "this user")

    async def _take(self, bucket: str, rate_per_s: float, burst: int, who: str) -> None:
        if rate_per_s <= 0 or time.monotonic() < self._unchecked_until:
            return
        while True:
            lease = self._leases.get(bucket)
            if lease is not None:
                if lease.tokens > 0 and time.monotonic() < lease.stale_at:
                    lease.tokens -= 1
                    return
                del self._leases[bucket]
            asking = self._asking.get(bucket)
            if asking is None:
                break
            await asyncio.shield(asking)  # one request asks Redis; the others share its lease
        want = max(1, min(burst, int(rate_per_s * LEASE_S)))
        self._asking[bucket] = asking = asyncio.get_running_loop().create_future()
        try:
            taken, wait_ms = await self._ask(bucket, rate_per_s, burst, want)
        finally:
            del self._asking[bucket]
            asking.set_result(None)
        if taken is None:  # Redis is unavailable: admitted unchecked
            return
        if not taken:
            raise TooManyRequests(
                f"rate limit for {who}: {rate_per_s:g} requests/s, bursts of {burst}",
                retry_after_s=int(wait_ms) / 1000,
            )
        if int(taken) > 1:
            self._keep(bucket, _Lease(int(taken) - 1, time.monotonic() + LEASE_TTL_S))

    async def _ask(
        self, bucket: str, rate_per_s: float, burst: int, want: int
    ) -> tuple[int | None, int]:
        """(tokens taken, ms to wait if none) from the bucket; (None, 0) when Redis did not
        answer within the budget, which admits this request and the next `OPEN_S`'s."""
        try:
            return await self._asks(_Ask(bucket, rate_per_s, burst, want))
        except Exception as exc:
            if not isinstance(exc, TimeoutError) and outage_of(exc) != "redis":
                raise
            self._unchecked_until = time.monotonic() + OPEN_S
            log.warning("rate limits unchecked for %g s: Redis is unavailable (%r)", OPEN_S, exc)
            return None, 0

    async def _ask_many(self, asks: list[_Ask]) -> list[tuple[int, int]]:
        """Every ask of a tick in one pipeline (one alone: one call), bounded by
        `ASK_BUDGET_S` in all."""
        script = self._script
        if len(asks) == 1:  # alone in its tick, as most asks are: a pipeline of one costs more
            [ask] = asks
            async with asyncio.timeout(ASK_BUDGET_S):
                reply = await script(keys=[ask.bucket], args=[ask.rate_per_s, ask.burst, ask.want])
            return [(int(reply[0]), int(reply[1]))]

        def build(pipe: Any) -> None:
            for ask in asks:
                queue_script(pipe, script, [ask.bucket], [ask.rate_per_s, ask.burst, ask.want])

        replies = await pipelined(self._redis, build, [script], timeout_s=ASK_BUDGET_S)
        return [(int(taken), int(wait_ms)) for taken, wait_ms in replies]

    async def aclose(self) -> None:
        """Cancel the asks in flight (the hub is stopping)."""
        await self._asks.aclose()

    def _keep(self, bucket: str, lease: _Lease) -> None:
        if len(self._leases) >= MAX_LEASES:
            now = time.monotonic()
            self._leases = {b: kept for b, kept in self._leases.items() if kept.stale_at > now}
        self._leases[bucket] = lease
