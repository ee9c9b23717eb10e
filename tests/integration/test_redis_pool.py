"""The shared Redis client waits for a free pooled connection instead of failing."""

from __future__ import annotations

import asyncio
from typing import Any

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
