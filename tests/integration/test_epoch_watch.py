"""The epoch watch: a running hub notices its Redis data is gone and rebuilds it from
PostgreSQL, without a restart (only this test's key prefix is deleted, never FLUSHALL:
the fault suite flushes its own Valkey)."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from notifyhub.settings import Settings
from notifyhub.store.keys import Keys


async def _drop_prefix(redis: Redis, prefix: str) -> int:
    keys = [key async for key in redis.scan_iter(match=prefix + "*", count=1000)]
    return int(await redis.unlink(*keys)) if keys else 0


async def test_lost_keys_are_rebuilt_without_restart(
    hub: Any, settings: Settings, redis: Redis, create_key: Any, publish_key: str
) -> None:
    consume_key = await create_key("epoch-consume", "consume")
    keys = Keys(settings.redis_prefix)
    body = {"queue": "epoch", "body": {"n": 1}, "delay_ms": 300}
    pushed = await hub.client.post(
        "/v1/delayed", json=body, headers={"Authorization": f"Bearer {publish_key}"}
    )
    message_id = pushed.json()["id"]
    state_key = keys.delayed(keys.delayed_set(message_id, settings.delayed.sets)).state
    assert await redis.exists(keys.epoch)

    assert await _drop_prefix(redis, settings.redis_prefix) > 0
    async with asyncio.timeout(10):
        while not (await redis.exists(keys.epoch) and await redis.hexists(state_key, message_id)):
            await asyncio.sleep(0.05)

    response = await hub.client.get(
        "/v1/queues/epoch/messages",
        params={"wait": 5},
        headers={"Authorization": f"Bearer {consume_key}"},
    )
    assert [m["id"] for m in response.json()["messages"]] == [message_id]
