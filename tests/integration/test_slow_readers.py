"""Slow readers: a client that stops reading is ended by the send timeout, never by a
Redis error, and every way a stream ends is counted by reason."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from integration.test_inbox_store import make_notification
from notifyhub.metrics import Metrics, StreamEnd
from notifyhub.settings import Limits, Settings, StreamSettings
from notifyhub.store.inbox import ChangeRead, InboxStore
from notifyhub.store.keys import Keys, member
from support.rawhttp import stuck_stream
from support.sse import EventReader

STUCK = 12
ROUND = 25
BIG = {"body": "b" * 4000, "data": {"blob": "d" * 15_000}}
"""About 20 KB an event: a stuck client's socket buffers fill within a few rounds."""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"stream": StreamSettings(send_timeout_s=1.0)})


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _ended(metrics: Metrics, reason: StreamEnd) -> float:
    value: float = metrics.streams_dropped_total.labels(reason=reason.value)._value.get()
    return value


def _notifications_sent(metrics: Metrics) -> float:
    value: float = metrics.stream_events_sent_total.labels(type="notification")._value.get()
    return value


async def _publish_round(hub: Any, key: str, users: list[str], sent: list[str]) -> None:
    body = {"recipients": {"users": users}, "title": "burst", **BIG}
    responses = await asyncio.gather(
        *(hub.client.post("/v1/notifications", json=body, headers=_auth(key)) for _ in range(ROUND))
    )
    refused = [r for r in responses if r.status_code != 202]
    assert not refused, f"{len(refused)} of {len(responses)}: {refused[0].text}"
    sent.extend(r.json()["id"] for r in responses)


async def _read_all(reader: EventReader, received: list[str]) -> None:
    while True:
        event = await reader.next(timeout=30)
        if event.event == "notification":
            received.append(event.data["id"])


@pytest.mark.slow
@pytest.mark.parametrize("announced", [False, True], ids=["copies", "announced"])
async def test_stuck_clients_end_by_send_timeout_and_spare_a_healthy_stream(
    settings: Settings, start_hub: Any, publish_key: str, make_token: Any, announced: bool
) -> None:
    """Announced (each round a broadcast shown before its copies: written at once to a
    waiting stream while its client keeps up, api/protocol.py `write_now`, else queued
    for the stream), the same holds."""
    announce_at = 2 if announced else settings.limits.announce_at
    limits = settings.limits.model_copy(update={"announce_at": announce_at})
    async with start_hub(settings.model_copy(update={"limits": limits})) as hub:
        await _stuck_and_steady(hub, publish_key, make_token)


async def _stuck_and_steady(hub: Any, publish_key: str, make_token: Any) -> None:
    metrics = hub.app_state["metrics"]
    socks = [await stuck_stream(hub.base_url, make_token(f"stuck{i}")) for i in range(STUCK)]
    users = [f"stuck{i}" for i in range(STUCK)] + ["steady"]
    sent: list[str] = []
    received: list[str] = []
    try:
        async with (
            httpx.AsyncClient(timeout=30) as client,
            client.stream(
                "GET", f"{hub.base_url}/v1/me/stream", headers=_auth(make_token("steady"))
            ) as response,
        ):
            task = asyncio.create_task(_read_all(EventReader(response), received))
            async with asyncio.timeout(60):
                while _ended(metrics, StreamEnd.SEND_TIMEOUT) < STUCK:
                    await _publish_round(hub, publish_key, users, sent)
                while len(received) < len(sent) and not task.done():
                    await asyncio.sleep(0.05)
            task.cancel()
    finally:
        for sock in socks:
            sock.close()
    assert sorted(received) == sorted(sent)  # the healthy stream got every event, once
    assert _ended(metrics, StreamEnd.SEND_TIMEOUT) == STUCK
    assert _ended(metrics, StreamEnd.REDIS_ERROR) == 0


OTHERS = 20
BURST = 120
NOTE = "n" * 4000
"""About 4.2 KB an event: a burst puts 500 KB behind each stuck stream, more than its
bounded buffers hold, less than the kernel's auto-tuned send buffer alone would (MBs)."""
HEALTHY_WITHIN_S = 20.0
"""A third of the send timeout these tests set (60 s): the stuck streams' end cannot be
what lets the burst through."""


@pytest.mark.slow
@pytest.mark.parametrize("announced", [False, True], ids=["copies", "announced"])
async def test_stuck_streams_do_not_hold_back_a_healthy_one(
    settings: Settings, start_hub: Any, publish_key: str, make_token: Any, announced: bool
) -> None:
    """Stuck streams (2 KB receive buffers, never read) of other users and one of the
    healthy user's own, all recipients of every notification of a burst (announced: each
    a broadcast shown ahead of its copies): the healthy stream gets the whole burst long
    before any send timeout, and each stuck stream is sent no more than its bounded
    buffers hold, then waits in its send."""
    stream = settings.stream.model_copy(update={"send_timeout_s": 60.0})
    announce_at = 2 if announced else settings.limits.announce_at
    limits = settings.limits.model_copy(update={"announce_at": announce_at})
    async with start_hub(settings.model_copy(update={"stream": stream, "limits": limits})) as hub:
        users = [f"other{i}" for i in range(OTHERS)] + ["healthy"]
        socks = [await stuck_stream(hub.base_url, make_token(u), rcvbuf=2048) for u in users]
        try:
            await _burst_past_stuck_streams(hub, publish_key, make_token, users)
        finally:
            for sock in socks:
                sock.close()


async def _burst_past_stuck_streams(
    hub: Any, publish_key: str, make_token: Any, users: list[str]
) -> None:
    metrics, settings = hub.app_state["metrics"], hub.app_state["settings"]
    sent: list[str] = []
    received: list[str] = []
    before = _notifications_sent(metrics)
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream(
            "GET", f"{hub.base_url}/v1/me/stream", headers=_auth(make_token("healthy"))
        ) as response,
    ):
        events = EventReader(response)
        assert (await events.next()).event == "counts"
        task = asyncio.create_task(_read_all(events, received))
        try:
            async with asyncio.timeout(HEALTHY_WITHIN_S):
                await _burst(hub, publish_key, users, sent)
                while len(received) < len(sent) and not task.done():
                    await asyncio.sleep(0.05)
        finally:
            task.cancel()
        assert sorted(received) == sorted(sent)
        await _until_stuck_streams_wait(hub.app_state["hub"], len(users))
    to_stuck = _notifications_sent(metrics) - before - len(sent)
    held = 2 * settings.stream.send_buffer_bytes + 64 * 1024 + 2 * settings.limits.stream_read_bytes
    assert to_stuck <= len(users) * held / len(NOTE), to_stuck  # (without a bound: all)
    assert _ended(metrics, StreamEnd.SEND_TIMEOUT) == 0


async def _burst(hub: Any, key: str, users: list[str], sent: list[str]) -> None:
    body = {"recipients": {"users": users}, "title": "burst", "body": NOTE}
    gate = asyncio.Semaphore(10)

    async def publish() -> None:
        async with gate:
            response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
        assert response.status_code == 202, response.text
        sent.append(response.json()["id"])

    await asyncio.gather(*(publish() for _ in range(BURST)))


async def _until_stuck_streams_wait(hub: Any, stuck: int) -> None:
    """Until every stuck stream waits in a send: its client holds all it may."""
    async with asyncio.timeout(10):
        while sum(1 for subs in hub._subs.values() for sub in subs if sub.sending_since) < stuck:
            await asyncio.sleep(0.05)


async def test_a_read_stops_at_its_byte_budget(redis: Redis, settings: Settings) -> None:
    """Many streams far behind read in one pipeline: each read stops near the budget
    (one entry past it at most) instead of returning its whole backlog."""
    limits = Limits(stream_read_bytes=8 * 1024)
    store = InboxStore(redis, Keys(settings.redis_prefix), limits)
    users = [("default", f"behind{i}") for i in range(5)]
    for _ in range(20):
        await store.place(make_notification(body="x" * 3000), users)
    reads = [ChangeRead(tenant, user, 0, 200) for tenant, user in users]
    for changes in await store.changes_many(reads):
        assert changes.seq == 20
        assert len(changes.entries) == 3  # 3 x ~3.3 KB pass 8 KiB
    rest = await store.changes("default", "behind0", 3, 200)
    assert [c.entry.seq for c in rest.entries] == [4, 5, 6]


async def test_every_stream_end_is_counted_by_reason(
    hub: Any, publish_key: str, make_token: Any, redis: Redis, settings: Settings
) -> None:
    metrics = hub.app_state["metrics"]
    url = f"{hub.base_url}/v1/me/stream"
    async with (
        httpx.AsyncClient(timeout=10) as client,
        client.stream("GET", url, headers=_auth(make_token("leaver"))) as response,
    ):
        assert (await EventReader(response).next()).event == "counts"
    async with asyncio.timeout(5):
        while _ended(metrics, StreamEnd.CLIENT_LEFT) < 1:
            await asyncio.sleep(0.02)
    # A change log Redis refuses to read (WRONGTYPE): the stream ends with a Redis error.
    async with (
        httpx.AsyncClient(timeout=10) as client,
        client.stream("GET", url, headers=_auth(make_token("broken"))) as response,
    ):
        events = EventReader(response)
        assert (await events.next()).event == "counts"
        keys = Keys(settings.redis_prefix)
        await redis.set(keys.inbox("default", "broken").log, "not a sorted set")
        store = hub.app_state["store"]
        for channel, payload in store.doorbells.messages([(member("default", "broken"), 1)]):
            await redis.publish(channel, payload)
        with pytest.raises(httpx.RemoteProtocolError):  # ended without its last chunk
            await events.next()
    assert _ended(metrics, StreamEnd.REDIS_ERROR) == 1
    assert _ended(metrics, StreamEnd.SEND_TIMEOUT) == 0
