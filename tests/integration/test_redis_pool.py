"""The shared Redis client: waits for a free pooled connection instead of failing, and
packs commands with hiredis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import DataError

from notifyhub.store import client
from notifyhub.store.client import create_redis


async def test_more_callers_than_connections_wait_their_turn(settings: Any) -> None:
    """200 concurrent calls on a 4-connection pool all succeed (redis-py's own pool
    raises MaxConnectionsError instead, which broke broadcasts to many streams)."""
    redis = create_redis(settings.redis_url, pool_size=4, pool_timeout_s=10)
    try:
        results = await asyncio.gather(*(redis.ping() for _ in range(200)))
        assert all(results)
        clients = await redis.client_list()
        assert len(clients) >= 1
    finally:
        await redis.aclose()


async def test_commands_are_packed_by_hiredis_as_redis_py_would(settings: Any) -> None:
    """The clients pack with hiredis (redis-py's asyncio packer costs ~1 us an argument);
    the bytes on the wire are the ones redis-py's own packer writes, and values it refuses
    are still refused with DataError."""
    redis = create_redis(settings.redis_url, pool_size=2)
    key = f"{settings.redis_prefix}packed"
    try:
        connection = redis.connection_pool.make_connection()
        assert isinstance(connection, client._HiredisPacking)
        args = ("ZADD", key, 1.5, "é", 12, b"\x00raw", 2**62, bytearray(b"ba"))
        assert b"".join(connection.pack_command(*args)) == b"".join(
            AbstractConnection.pack_command(connection, *args)
        )
        assert await redis.zadd(key, {"é": 1.5, b"\x00raw": 12, "big": 2**62}) == 3
        assert await redis.zscore(key, "big") == float(2**62)
        assert await redis.config_get("maxmemory-policy")  # "CONFIG GET": two arguments
        with pytest.raises(DataError):
            await redis.set(key, True)  # type: ignore[arg-type]
    finally:
        await redis.delete(key)
        await redis.aclose()
