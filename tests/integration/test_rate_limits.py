"""Rate limits: per-API-key and per-user token buckets in Redis -> 429 with Retry-After."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from notifyhub.domain.auth import Scope, ServicePrincipal, UserPrincipal
from notifyhub.errors import TooManyRequests
from notifyhub.settings import RateLimits, Settings
from notifyhub.store.keys import Keys, member
from notifyhub.store.ratelimit import RateLimiter

BURST = 3


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Buckets that refill once a minute: the 4th request in a row is over the limit."""
    limits = RateLimits(
        per_key_per_s=1 / 60, per_key_burst=BURST, per_user_per_s=1 / 60, per_user_burst=BURST
    )
    return settings.model_copy(update={"rate_limits": limits})


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _assert_429(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 429
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= 60


async def test_per_user_limit_is_429_with_retry_after(hub: Any, make_token: Any) -> None:
    alice = _auth(make_token("rl-alice"))
    for _ in range(BURST):
        assert (await hub.client.get("/v1/me/notifications/counts", headers=alice)).is_success
    _assert_429(await hub.client.get("/v1/me/notifications/counts", headers=alice))
    # Every user route shares the bucket, streams included ...
    _assert_429(await hub.client.get("/v1/me/stream", headers=alice))
    # ... but another user, or the same user id in another tenant, has a bucket of their own.
    bob = _auth(make_token("rl-bob"))
    assert (await hub.client.get("/v1/me/notifications/counts", headers=bob)).is_success
    elsewhere = _auth(make_token("rl-alice", tenant="acme"))
    assert (await hub.client.get("/v1/me/notifications/counts", headers=elsewhere)).is_success


async def test_per_key_limit_is_429_with_retry_after(hub: Any, create_key: Any) -> None:
    key = _auth(await create_key("rl-key", "admin"))
    for _ in range(BURST):
        assert (await hub.client.get("/v1/admin/groups", headers=key)).is_success
    _assert_429(await hub.client.get("/v1/admin/groups", headers=key))
    other = _auth(await create_key("rl-other", "admin"))
    assert (await hub.client.get("/v1/admin/groups", headers=other)).is_success


async def test_refused_credentials_do_not_spend_the_bucket(hub: Any, make_token: Any) -> None:
    for _ in range(BURST + 2):
        bad = await hub.client.get("/v1/me/notifications", headers=_auth("not-a-token"))
        assert bad.status_code == 401
    carol = _auth(make_token("rl-carol"))
    assert (await hub.client.get("/v1/me/notifications/counts", headers=carol)).is_success


def _limiter(redis: Redis, settings: Settings, **limits: float) -> RateLimiter:
    return RateLimiter(redis, Keys(settings.redis_prefix), RateLimits(**limits))  # type: ignore[arg-type]


async def test_bucket_refills_at_its_rate(redis: Redis, settings: Settings) -> None:
    limiter = _limiter(redis, settings, per_user_per_s=20, per_user_burst=1)
    dana = UserPrincipal(tenant="default", user="rl-dana")
    await limiter.check_user(dana)
    with pytest.raises(TooManyRequests) as refused:
        await limiter.check_user(dana)
    assert refused.value.retry_after_s is not None and 0 < refused.value.retry_after_s <= 0.05
    await asyncio.sleep(0.1)  # two tokens' worth of time; the bucket holds one
    await limiter.check_user(dana)


async def test_rate_zero_turns_a_limit_off(redis: Redis, settings: Settings) -> None:
    limiter = _limiter(redis, settings, per_key_per_s=0, per_key_burst=1)
    service = ServicePrincipal(key_id="k-off", name="off", scope=Scope.PUBLISH, tenant=None)
    for _ in range(20):
        await limiter.check_key(service)
    assert await redis.exists(Keys(settings.redis_prefix).rate_limit("key", "k-off")) == 0


async def test_idle_buckets_expire(redis: Redis, settings: Settings) -> None:
    limiter = _limiter(redis, settings, per_user_per_s=10, per_user_burst=5)
    await limiter.check_user(UserPrincipal(tenant="default", user="rl-erin"))
    key = Keys(settings.redis_prefix).rate_limit("user", "default/rl-erin")
    assert 0 < await redis.pttl(key) <= 1500  # refills in 0.5 s, kept 1 s more


async def test_a_lease_is_spent_locally_then_the_bucket_is_asked(
    redis: Redis, settings: Settings
) -> None:
    """At 500/s a check takes a lease of 10 tokens (20 ms worth): the next 9 are admitted
    without Redis; the one after asks the bucket again."""
    limiter = _limiter(redis, settings, per_key_per_s=500, per_key_burst=100)
    service = ServicePrincipal(key_id="k-lease", name="lease", scope=Scope.PUBLISH, tenant=None)
    await limiter.check_key(service)
    bucket = Keys(settings.redis_prefix).rate_limit("key", "k-lease")
    assert float(await redis.hget(bucket, "tokens") or 0) == pytest.approx(90, abs=1)
    # Empty the shared bucket far into the future: only the local lease is left.
    await redis.hset(bucket, mapping={"tokens": "-1000", "ts": 2**50})
    for _ in range(9):
        await limiter.check_key(service)
    with pytest.raises(TooManyRequests):
        await limiter.check_key(service)


async def test_leasing_processes_never_admit_more_than_the_bucket(
    redis: Redis, settings: Settings
) -> None:
    """Two processes (two limiters) hammering one bucket admit at most burst + rate x time."""
    rate, burst = 500.0, 30
    limiters = [_limiter(redis, settings, per_key_per_s=rate, per_key_burst=burst) for _ in "ab"]
    service = ServicePrincipal(key_id="k-shared", name="shared", scope=Scope.PUBLISH, tenant=None)
    admitted = 0
    started = asyncio.get_running_loop().time()
    for i in range(400):
        try:
            await limiters[i % 2].check_key(service)
            admitted += 1
        except TooManyRequests:
            pass
    elapsed = asyncio.get_running_loop().time() - started
    assert burst <= admitted <= burst + rate * elapsed + 1


async def test_concurrent_requests_share_one_lease(redis: Redis, settings: Settings) -> None:
    """32 requests arriving together ask Redis once for a lease of 20 and share it, rather
    than each taking a lease of its own (which would drain the bucket 32 times faster)."""
    limiter = _limiter(redis, settings, per_key_per_s=1000, per_key_burst=1000)
    service = ServicePrincipal(key_id="k-herd", name="herd", scope=Scope.PUBLISH, tenant=None)
    await asyncio.gather(*(limiter.check_key(service) for _ in range(32)))
    bucket = Keys(settings.redis_prefix).rate_limit("key", "k-herd")
    left = float(await redis.hget(bucket, "tokens") or 0)
    assert 1000 - 40 - 1 <= left <= 1000 - 32 + 1  # two leases of 20 (plus refill), not 32


async def test_the_asks_of_one_tick_share_one_round_trip(redis: Redis, settings: Settings) -> None:
    """60 users opening streams together (a reconnect storm) ask their 60 buckets over one
    connection, and each bucket is charged once."""
    name = f"limiter-{uuid.uuid4().hex[:8]}"
    assert settings.redis_url is not None
    client = Redis.from_url(settings.redis_url, client_name=name)
    limiter = _limiter(client, settings, per_user_per_s=1, per_user_burst=5)
    users = [UserPrincipal(tenant="default", user=f"rl-storm-{i}") for i in range(60)]
    try:
        await asyncio.gather(*(limiter.check_user(user) for user in users))
        connections = [c for c in await redis.client_list() if c.get("name") == name]
        assert len(connections) == 1
    finally:
        await limiter.aclose()
        await client.aclose()
    keys = Keys(settings.redis_prefix)
    for user in users:
        bucket = keys.rate_limit("user", member(user.tenant, user.user))
        assert float(await redis.hget(bucket, "tokens") or 0) == pytest.approx(4, abs=0.1)


async def test_while_redis_is_down_requests_are_admitted_unchecked(settings: Settings) -> None:
    """Rate limiting fails open: every check of the tick Redis failed is admitted, and the
    next ones (for `OPEN_S`) without asking it."""
    dead = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
    limiter = _limiter(dead, settings, per_user_per_s=1, per_user_burst=1)
    users = [UserPrincipal(tenant="default", user=f"rl-down-{i}") for i in range(5)]
    try:
        await asyncio.gather(*(limiter.check_user(user) for user in users))
        for _ in range(3):  # a burst of 1 would refuse these, were Redis asked
            await limiter.check_user(users[0])
    finally:
        await limiter.aclose()
        await dead.aclose()
