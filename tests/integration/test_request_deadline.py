"""The request deadline: however long the stores take, a request answers within it (503
naming the store it waited on), a write cut short leaves nothing committed, a long poll
renews it each round, a fan-out each batch, and an event stream outlives it.

Redis is made to hang through a proxy that holds every byte (support/proxy.py), with a
Redis command timeout far beyond the client's: only the deadline can answer in time; or
to answer slowly, through the same proxy holding each chunk a while.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from redis.asyncio import Redis

from notifyhub.api.app import create_app
from notifyhub.deadline import CURRENT, Deadline
from notifyhub.outages import waited_on
from notifyhub.settings import Settings
from notifyhub.store.keys import INBOX_FIELDS, Keys
from notifyhub.store.scripts import pipelined_each
from support.proxy import CuttableProxy

Hub = Callable[..., AbstractAsyncContextManager[Any]]
DEADLINE_S = 1.0
CLIENT_TIMEOUT_S = 10.0
"""Far below the hung Redis command's own timeout (60 s): answering at all is the check."""
PREFERENCES = "/v1/me/preferences"
FAN_OUT = [f"fan{i}" for i in range(600)]
BATCH = 20
SLOW_LINK_S = 0.05
"""600 users in batches of 20, two in flight, each chunk to and from Redis held 0.05 s:
15 round trips of 0.1 s or more in turn, past the 1 s deadline, each well within it."""


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


def _fan_out_settings(settings: Settings, proxy: CuttableProxy) -> Settings:
    """Fan-outs in batches of BATCH copies (a deferred one's are written after its 202:
    services/fanouts.py)."""
    changed = {
        "redis_url": f"redis://127.0.0.1:{proxy.port}/0",
        "redis_timeout_s": 60.0,
        "request_deadline_s": DEADLINE_S,
        "limits": settings.limits.model_copy(update={"fanout_batch": BATCH}),
    }
    return settings.model_copy(update=changed)


async def _publish(client: httpx.AsyncClient, key: str, users: list[str]) -> httpx.Response:
    body = {"recipients": {"users": users}, "title": "to all of them"}
    return await client.post(
        "/v1/notifications", json=body, headers={"Authorization": f"Bearer {key}"}
    )


async def test_a_fan_out_longer_than_the_deadline_renews_it_batch_by_batch(
    settings: Settings,
    start_hub: Hub,
    redis_proxy: CuttableProxy,
    publish_key: str,
    make_token: Any,
) -> None:
    """A fan-out whose round trips keep ending is working, not stuck: it answers 202
    however many deadlines it takes in all."""
    async with start_hub(_fan_out_settings(settings, redis_proxy)) as hub:
        client = httpx.AsyncClient(base_url=hub.base_url, timeout=CLIENT_TIMEOUT_S)
        async with client:
            warm = await _publish(client, publish_key, ["warm"])  # the key's check cached
            assert warm.status_code == 202, warm.text
            redis_proxy.delay_s = SLOW_LINK_S
            started = time.monotonic()
            response = await _publish(client, publish_key, FAN_OUT)
            took_s = time.monotonic() - started
            redis_proxy.delay_s = 0.0
            assert response.status_code == 202, response.text
            assert response.json()["recipients"] == len(FAN_OUT)
            assert took_s > 1.2 * DEADLINE_S  # the setup: longer than one budget in all
            last = {"Authorization": f"Bearer {make_token(FAN_OUT[-1])}"}
            counts = await client.get("/v1/me/notifications/counts", headers=last)
            assert counts.status_code == 200, counts.text
            assert counts.json()["total"] == 1


async def test_a_fan_out_whose_redis_stops_answering_is_still_cut_at_the_deadline(
    settings: Settings,
    start_hub: Hub,
    redis_proxy: CuttableProxy,
    redis: Redis,
    publish_key: str,
) -> None:
    """The renewals end with the round trips: a store frozen mid-way still answers 503."""
    async with start_hub(_fan_out_settings(settings, redis_proxy)) as hub:
        client = httpx.AsyncClient(base_url=hub.base_url, timeout=CLIENT_TIMEOUT_S)
        async with client:
            warm = await _publish(client, publish_key, ["warm"])
            assert warm.status_code == 202, warm.text
            redis_proxy.delay_s = SLOW_LINK_S
            posting = asyncio.ensure_future(_publish(client, publish_key, FAN_OUT))
            # the first batch written (read past the proxy), then Redis stops answering
            items = Keys(settings.redis_prefix).inbox_list("default", FAN_OUT[0])
            async with asyncio.timeout(CLIENT_TIMEOUT_S):
                while not await redis.hlen(items[INBOX_FIELDS.index("items")]):
                    await asyncio.sleep(0.02)
            redis_proxy.freeze()
            response = await posting
            redis_proxy.thaw()
            assert response.status_code == 503, response.text
            assert response.json()["detail"] == "Redis is unavailable"


async def test_each_round_trip_of_a_bulk_write_renews_the_deadline(
    redis_proxy: CuttableProxy,
) -> None:
    """`pipelined_each` (a deferred fan-out's recipient index and re-read doorbells): ten
    round trips in turn of 0.1 s or more each, under a 0.3 s deadline renewed by each."""
    slow = Redis.from_url(f"redis://127.0.0.1:{redis_proxy.port}/0")
    await slow.ping()
    redis_proxy.delay_s = SLOW_LINK_S

    async def pings() -> AsyncIterator[Callable[[Any], None]]:
        for _ in range(10):
            yield lambda pipe: pipe.ping()

    try:
        async with asyncio.timeout(0.3) as timeout:
            token = CURRENT.set(Deadline(timeout, 0.3))
            try:
                await pipelined_each(slow, pings(), most=1)
            finally:
                CURRENT.reset(token)
    finally:
        await slow.aclose()


async def test_a_recall_longer_than_the_deadline_renews_it_batch_by_batch(
    settings: Settings,
    start_hub: Hub,
    redis_proxy: CuttableProxy,
    publish_key: str,
    make_token: Any,
) -> None:
    """A recall from many inboxes is working, not stuck: it takes them a batch per round
    trip, each renewing the deadline, and answers 204 with every copy gone (it was a
    round trip or two per user, past the deadline: a 503 saying Redis was unavailable,
    the notification left in some inboxes and not in others)."""
    users = FAN_OUT[:200]
    async with start_hub(_fan_out_settings(settings, redis_proxy)) as hub:
        client = httpx.AsyncClient(base_url=hub.base_url, timeout=CLIENT_TIMEOUT_S)
        async with client:
            response = await _publish(client, publish_key, users)
            assert response.status_code == 202, response.text
            sent = response.json()["id"]
            redis_proxy.delay_s = SLOW_LINK_S
            started = time.monotonic()
            recalled = await client.delete(
                f"/v1/notifications/{sent}", headers={"Authorization": f"Bearer {publish_key}"}
            )
            took_s = time.monotonic() - started
            redis_proxy.delay_s = 0.0
            assert recalled.status_code == 204, recalled.text
            assert took_s > 1.2 * DEADLINE_S  # the setup: longer than one budget in all
            for user in (users[0], users[-1]):
                headers = {"Authorization": f"Bearer {make_token(user)}"}
                counts = await client.get("/v1/me/notifications/counts", headers=headers)
                assert counts.json()["total"] == 0, (user, counts.text)
