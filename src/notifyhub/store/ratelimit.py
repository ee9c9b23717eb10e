"""Per-API-key and per-user token buckets in Redis, one atomic script per check."""

from __future__ import annotations

from importlib.resources import files

from redis.asyncio import Redis

from notifyhub.domain.auth import ServicePrincipal, UserPrincipal
from notifyhub.errors import TooManyRequests
from notifyhub.settings import RateLimits
from notifyhub.store.keys import Keys, member


class RateLimiter:
    """Admits or refuses one request against a bucket; a rate of 0 turns a limit off."""

    def __init__(self, redis: Redis, keys: Keys, limits: RateLimits) -> None:
        self._keys = keys
        self._limits = limits
        source = (files("notifyhub.store") / "lua" / "ratelimit.lua").read_text(encoding="utf-8")
        self._script = redis.register_script(source)

    async def check_key(self, principal: ServicePrincipal) -> None:
        limits = self._limits
        bucket = self._keys.rate_limit("key", principal.key_id)
        await self._take(bucket, limits.per_key_per_s, limits.per_key_burst, "this API key")

    async def check_user(self, principal: UserPrincipal) -> None:
        limits = self._limits
        bucket = self._keys.rate_limit("user", member(principal.tenant, principal.user))
        await self._take(bucket, limits.per_user_per_s, limits.per_user_burst, "this user")

    async def _take(self, bucket: str, rate_per_s: float, burst: int, who: str) -> None:
        if rate_per_s <= 0:
            return
        admitted, wait_ms = await self._script(keys=[bucket], args=[rate_per_s, burst, 1])
        if not admitted:
            raise TooManyRequests(
                f"rate limit for {who}: {rate_per_s:g} requests/s, bursts of {burst}",
                retry_after_s=int(wait_ms) / 1000,
            )
