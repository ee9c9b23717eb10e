"""The request deadline: however long the stores take, a request answers within it (503
naming the store it waited on), a write cut short leaves nothing committed, a long poll
renews it each round and an event stream outlives it.

Redis is made to hang through a proxy that holds every byte (support/proxy.py), with a
Redis command timeout far beyond the client's: only the deadline can answer in time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from redis.asyncio import Redis

from notifyhub.api.app import create_app
from notifyhub.outages import waited_on
from notifyhub.settings import Settings
from support.proxy import CuttableProxy

Hub = Callable[..., AbstractAsyncContextManager[Any]]
DEADLINE_S = 1.0
CLIENT_TIMEOUT_S = 10.0
"""Far below the hung Redis command's own timeout (60 s): answering at all is the check."""
PREFERENCES = "/v1/me/preferences"


@pytest.fixture
async def redis_proxy(settings: Settings) -> AsyncIterator[CuttableProxy]:
    assert settings.redis_url is not None
    proxy = await CuttableProxy(urlsplit(settings.redis_url).port or 6379).start()
    yield proxy
    proxy.thaw()
    await proxy.close()


def _preferences(inbox: bool) -> dict[str, object]:
    return {"categories": {"news": {"inbox": inbox, "push": False, "email": True}}}


async def test_a_request_stuck_on_redis_answers_503_at_its_deadline_and_commits_nothing(
    settings: Settings, start_hub: Hub, redis_proxy: CuttableProxy, make_token: Any
) -> None:
    changed = {
        "redis_url": f"redis://127.0.0.1:{redis_proxy.port}/0",
        "redis_timeout_s": 60.0,
        "request_deadline_s": DEADLINE_S,
    }
    headers = {"Authorization": f"Bearer {make_token('dee')}"}
    async with start_hub(settings.model_copy(update=changed)) as hub:
        client = httpx.AsyncClient(base_url=hub.base_url, timeout=CLIENT_TIMEOUT_S)
        async with client:
            response = await client.put(PREFERENCES, json=_preferences(True), headers=headers)
            assert response.status_code == 200, response.text
            redis_proxy.freeze()
            # The preferences are written to PostgreSQL, then to Redis in the same
            # transaction: cut short on Redis, the transaction is rolled back.
            response = await client.put(PREFERENCES, json=_preferences(False), headers=headers)
            assert response.status_code == 503, response.text
            assert response.headers["content-type"] == "application/problem+json"
            assert response.headers["retry-after"] == "1"
            assert response.json()["detail"] == "Redis is unavailable"
            counts = await client.get("/v1/me/notifications/counts", headers=headers)
            assert counts.status_code == 503, counts.text
            redis_proxy.thaw()
            kept = await client.get(PREFERENCES, headers=headers)
            assert kept.json()["categories"] == _preferences(True)["categories"]
    metrics = hub.app_state["metrics"].http_unavailable_total.labels(dependency="redis")
    assert metrics._value.get() >= 2


async def test_a_long_poll_renews_its_deadline_each_round(
    settings: Settings, start_hub: Hub, admin_key: str
) -> None:
    """A 1 s wait (twice the deadline) is no store taking too long: each round of it
    gets the whole budget."""
    changed = {"request_deadline_s": 0.5}
    headers = {"Authorization": f"Bearer {admin_key}"}
    async with start_hub(settings.model_copy(update=changed)) as hub:
        # First the key's check, which a loaded PostgreSQL may take past 0.5 s; that is not
        # what this test is about, so ask until the hub has the key cached.
        for _ in range(20):
            warm = await hub.client.get("/v1/queues/idle/messages", headers=headers)
            if warm.status_code == 200:
                break
        assert warm.status_code == 200, warm.text
        response = await hub.client.get(
            "/v1/queues/idle/messages", params={"wait": 1}, headers=headers
        )
        assert response.status_code == 200, response.text
        assert response.json()["messages"] == []


@pytest.mark.parametrize("hot", [True, False], ids=["hot-entry", "route"])
async def test_an_event_stream_outlives_the_deadline(
    settings: Settings, start_hub: Hub, make_token: Any, hot: bool
) -> None:
    """The deadline bounds a stream's opening: pings keep coming long after it."""
    changed = {
        "request_deadline_s": 0.3,
        "stream": settings.stream.model_copy(update={"ping_s": 0.2}),
    }
    settings = settings.model_copy(update=changed)
    app = create_app(settings)
    if not hot:  # the FastAPI route serves it (tests/integration/test_route_parity.py)
        assert app.hot is not None
        app.hot.routes.clear()
    headers = {"Authorization": f"Bearer {make_token('sam')}"}
    async with start_hub(settings, app) as hub:
        # First the user's doorbell shard subscribed, which a loaded Redis may confirm past
        # 0.3 s; that is not what this test is about, so open until a stream is served.
        for _ in range(20):
            async with hub.client.stream("GET", "/v1/me/stream", headers=headers) as stream:
                if stream.status_code != 200:
                    continue
                pings = 0
                async for line in stream.aiter_lines():
                    pings += line == ": ping"
                    if pings == 4:  # 0.8 s of pings: past the deadline, still streaming
                        break
                break
        assert stream.status_code == 200


async def test_a_deadline_names_the_store_its_request_waited_on() -> None:
    """Cut short in the Redis driver, or in our layer over it: Redis; elsewhere: none."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # accepts, never answers (a hung server)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    redis = Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_timeout=None)
    try:
        with pytest.raises(TimeoutError) as in_driver:
            async with asyncio.timeout(0.2):
                await redis.ping()
        assert waited_on(in_driver.value) == "redis"
        with pytest.raises(TimeoutError) as elsewhere:
            async with asyncio.timeout(0.01):
                await asyncio.Event().wait()
        assert waited_on(elsewhere.value) is None
    finally:
        await redis.aclose()
        server.close()
        await server.wait_closed()
