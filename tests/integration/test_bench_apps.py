"""The bench's reference apps still take the bench's own request and store it.

The ingest rows (bench/ceiling.py) set the hub against them in the same run; an app that
drifted from the hub's models answers 500 and the row is not written (bench/bareapp.py
did so once the stored notification stopped carrying channels, digests and escalation).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import httpx
import orjson
from bench import bareapp, floorapp
from bench.ceiling import BODY
from redis.asyncio import Redis

from notifyhub.store.keys import INBOX_FIELDS, Keys


async def _publish(module: ModuleType, settings: Any, prefix: str) -> str:
    app = module.create_app(settings.redis_url, prefix)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            response = await client.post(
                "/v1/notifications", content=BODY, headers={"Content-Type": "application/json"}
            )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def test_the_bare_app_places_the_ingest_rows_request_with_the_hubs_script(
    redis: Redis, settings: Any
) -> None:
    prefix = settings.redis_prefix + "bare:"
    notification_id = await _publish(bareapp, settings, prefix)

    [user] = orjson.loads(BODY)["recipients"]["users"]
    tenant = "default"
    items = Keys(prefix).inbox_list(tenant, user)[INBOX_FIELDS.index("items")]
    stored = await redis.hget(items, notification_id)
    assert stored is not None
    assert orjson.loads(stored)["title"] == orjson.loads(BODY)["title"]


async def test_the_floor_app_stores_the_ingest_rows_request(redis: Redis, settings: Any) -> None:
    prefix = settings.redis_prefix + "floor:"
    notification_id = await _publish(floorapp, settings, prefix)

    [user] = orjson.loads(BODY)["recipients"]["users"]
    stored = await redis.hget(f"{prefix}{{{user}}}:items", notification_id)
    assert stored is not None and orjson.loads(stored)["id"] == notification_id
