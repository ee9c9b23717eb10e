"""While a dependency is down: /readyz names it, endpoints needing it answer 503
problem+json within a client's 5 s timeout, the rest keeps working, and the hub
recovers without a restart."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest

from support.faultenv import FaultEnv

pytestmark = pytest.mark.slow

CLIENT_TIMEOUT_S = 5.0


async def _unready(client: httpx.AsyncClient, failing: str) -> dict[str, bool]:
    async with asyncio.timeout(10):
        while True:
            response = await client.get("/readyz")
            checks: dict[str, bool] = response.json()["checks"]
            if response.status_code == 503 and not checks[failing]:
                return checks
            await asyncio.sleep(0.1)


def _assert_503(response: httpx.Response, dependency: str) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == f"{dependency} is unavailable"
    assert response.headers["retry-after"] == "1"


async def test_redis_down(fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]]) -> None:
    async with (
        fault_env() as env,
        httpx.AsyncClient(base_url=env.hub.base_url, timeout=CLIENT_TIMEOUT_S) as client,
    ):
        user = {"Authorization": f"Bearer {env.user_token('ann')}"}
        publish = {"Authorization": f"Bearer {env.publish_key}"}
        body = {"recipients": {"users": ["ann"]}, "title": "before"}
        assert (await client.post("/v1/notifications", json=body, headers=publish)).is_success
        await asyncio.to_thread(env.redis.kill)

        checks = await _unready(client, "redis")
        assert checks["postgres"]
        # httpx raises ReadTimeout past CLIENT_TIMEOUT_S: answering at all is the check.
        _assert_503(await client.get("/v1/me/notifications", headers=user), "Redis")
        _assert_503(await client.post("/v1/notifications", json=body, headers=publish), "Redis")
        _assert_503(await client.get("/v1/me/stream", headers=user), "Redis")

        await asyncio.to_thread(env.redis.start)
        await env.hub.wait_ready(timeout_s=30)
        # Every pooled connection the restart closed is retried, none answers 503.
        for _ in range(20):
            response = await client.get("/v1/me/notifications", headers=user)
            assert response.status_code == 200, response.text


async def test_postgres_down(
    fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]],
) -> None:
    async with (
        fault_env() as env,
        httpx.AsyncClient(base_url=env.hub.base_url, timeout=CLIENT_TIMEOUT_S) as client,
    ):
        user = {"Authorization": f"Bearer {env.user_token('bob')}"}
        publish = {"Authorization": f"Bearer {env.publish_key}"}
        delayed = {"topic": "outage", "body": {}, "delay_ms": 10}
        assert (await client.post("/v1/delayed", json=delayed, headers=publish)).is_success
        await asyncio.to_thread(env.postgres.stop, "immediate")
        try:
            checks = await _unready(client, "postgres")
            assert checks["redis"]
            _assert_503(
                await client.post("/v1/delayed", json=delayed, headers=publish), "PostgreSQL"
            )
            # The inbox lives in Redis: it keeps working (the publish key is cached).
            body = {"recipients": {"users": ["bob"]}, "title": "during"}
            posted = await client.post("/v1/notifications", json=body, headers=publish)
            assert posted.status_code == 202
            listed = await client.get("/v1/me/notifications", headers=user)
            assert [i["id"] for i in listed.json()["items"]] == [posted.json()["id"]]
        finally:
            await asyncio.to_thread(env.postgres.start)
        await env.hub.wait_ready(timeout_s=30)
        response = await client.post("/v1/delayed", json=delayed, headers=publish)
        assert response.status_code == 201, response.text
