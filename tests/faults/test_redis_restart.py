"""The shared Redis client retries across a Redis restart: no pooled connection that the
restart closed turns into an error (an asyncio client needs the asyncio `Retry`; the
synchronous one hands back an un-awaited coroutine and never retries)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from notifyhub.store.client import create_redis
from support.processes import RedisProcess

pytestmark = pytest.mark.slow

POOLED = 20


async def test_pooled_connections_survive_a_restart(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path / "valkey", appendonly=False)
    server.start()
    client = create_redis(server.url)
    try:
        await asyncio.gather(*(client.ping() for _ in range(POOLED)))
        await asyncio.to_thread(server.restart)
        script = client.register_script("return redis.call('INCR', KEYS[1])")
        results = await asyncio.gather(
            *(client.set(f"k{n}", n) for n in range(POOLED)),
            *(script(keys=["counter"]) for _ in range(POOLED)),
        )
        assert results[:POOLED] == [True] * POOLED
        assert sorted(results[POOLED:]) == list(range(1, POOLED + 1))
    finally:
        await client.aclose()
        server.stop()
