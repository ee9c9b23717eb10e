"""Redis URLs: Sentinel parsing, and which CONFIG values earn a start-up warning."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from notifyhub.store.client import (
    SentinelUrl,
    connect,
    create_redis,
    durability_warnings,
    parse_sentinel_url,
)


def test_sentinel_url_with_several_hosts_service_and_db() -> None:
    url = "redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2:26380,sentinel-c/mymaster/2"
    assert parse_sentinel_url(url) == SentinelUrl(
        sentinels=(("10.0.0.1", 26379), ("10.0.0.2", 26380), ("sentinel-c", 26379)),
        service="mymaster",
        db=2,
        password="s3cret",
    )


def test_sentinel_url_user_sentinel_password_ipv6_and_default_db() -> None:
    url = "redis+sentinel://app:p%40ss@[::1]:5000/cache?sentinel_password=watch"
    parsed = parse_sentinel_url(url)
    assert parsed == SentinelUrl(
        sentinels=(("::1", 5000),),
        service="cache",
        username="app",
        password="p@ss",
        sentinel_password="watch",
    )


@pytest.mark.parametrize(
    "url",
    ["redis://localhost:6379/0", "rediss://h:6380/1", "unix:///tmp/redis.sock"],
)
def test_other_schemes_are_not_sentinel(url: str) -> None:
    assert parse_sentinel_url(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://h:26379",  # no service
        "redis+sentinel:///mymaster",  # no sentinel
        "redis+sentinel://h:26379/mymaster/0/extra",
        "redis+sentinel://h:port/mymaster",
    ],
)
def test_malformed_sentinel_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"Sentinel URL|invalid literal"):
        parse_sentinel_url(url)


async def test_sentinel_client_is_built_without_connecting() -> None:
    client = connect("redis+sentinel://127.0.0.1:1/mymaster/3", socket_timeout=1.0)
    try:
        assert isinstance(client, Redis)
        kwargs = client.connection_pool.connection_kwargs
        assert kwargs["db"] == 3 and kwargs["socket_timeout"] == 1.0
        assert client.connection_pool.service_name == "mymaster"  # type: ignore[attr-defined]
    finally:
        await client.aclose()


async def test_shared_client_retries_and_checks_health() -> None:
    client = create_redis("redis://127.0.0.1:1/0")
    try:
        kwargs = client.connection_pool.connection_kwargs
        assert kwargs["health_check_interval"] == 30
        assert kwargs["retry"] is not None
    finally:
        await client.aclose()


def test_durability_warnings() -> None:
    safe = {"appendonly": "yes", "save": "", "maxmemory-policy": "noeviction"}
    assert durability_warnings(safe) == []
    assert durability_warnings({**safe, "appendonly": "no", "save": "3600 1"}) == []
    bare = durability_warnings({**safe, "appendonly": "no"})
    assert len(bare) == 1 and "persistence" in bare[0]
    evicting = durability_warnings({**safe, "maxmemory-policy": "allkeys-lru"})
    assert len(evicting) == 1 and "allkeys-lru" in evicting[0]
