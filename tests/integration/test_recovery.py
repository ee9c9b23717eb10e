"""Recovery: a killed Pub/Sub connection loses nothing (the cleaner has test_cleaner.py)."""

from __future__ import annotations

from typing import Any

import httpx
from redis.asyncio import Redis

from support.sse import EventReader
from support.tls import TEST_TLS


async def _kill_pubsub(redis: Redis, name: str) -> int:
    killed = 0
    for client in await redis.client_list(_type="pubsub"):
        if client.get("name") == name:
            killed += int(await redis.client_kill_filter(_id=client["id"]))
    return killed


async def test_pubsub_kill_then_resync(
    hub: Any, publish_key: str, make_token: Any, redis: Redis
) -> None:
    """Notifications published while the hub's Pub/Sub connection is down still arrive."""
    headers = {"Authorization": f"Bearer {make_token('pat')}"}
    hub_state = hub.app_state["hub"]
    async with (
        httpx.AsyncClient(timeout=10, verify=TEST_TLS) as client,
        client.stream("GET", f"{hub.base_url}/v1/me/stream", headers=headers) as response,
    ):
        events = EventReader(response)
        await events.next()
        assert await _kill_pubsub(redis, hub_state.client_name) == 1
        body = {"recipients": {"users": ["pat"]}, "title": "during the gap"}
        posted = await hub.client.post(
            "/v1/notifications", json=body, headers={"Authorization": f"Bearer {publish_key}"}
        )
        event, _ = await events.until("notification", timeout=10)
        assert event.data["id"] == posted.json()["id"]
    assert hub.app_state["metrics"].pubsub_reconnects_total._value.get() >= 1
