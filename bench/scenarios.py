"""Benchmark scenarios; each returns {metric: value} for one run."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx
import orjson
from redis.asyncio import Redis
from ulid import ULID

from notifyhub.store.delayed import DelayedStore
from notifyhub.store.keys import Keys

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

NOTES = """\
Notes: the ingest load generator is a raw-socket HTTP/1.1 keep-alive client (asyncio)
sharing the 2 cores with the hub, Redis and PostgreSQL, so absolute rates understate
what a dedicated host would do. Fan-out time is the POST's wall time: the 202 returns
only after every copy is in Redis and every doorbell is published. RSS per stream is
(hub RSS with N idle streams - RSS before) / N.
"""


class RawClient:
    """A minimal HTTP/1.1 keep-alive client: cheap enough not to be the bottleneck."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> int:
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self.writer.write(head.encode() + body)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await self.reader.readexactly(length)
        return int(status_line.split()[1])

    def close(self) -> None:
        self.writer.close()


async def ingest(hub: BenchHub, total: int = 4000, concurrency: int = 32) -> dict[str, float]:
    """Single-recipient POSTs at fixed concurrency."""
    body = orjson.dumps(
        {"recipients": {"users": ["bench-one"]}, "title": "hello", "body": "x" * 200}
    )
    headers = {"Authorization": f"Bearer {hub.publish_key}", "Content-Type": "application/json"}
    latencies: list[float] = []
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        client = RawClient(hub.base_url)
        await client.connect()
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            status = await client.request("POST", "/v1/notifications", headers, body)
            latencies.append(time.perf_counter() - started)
            assert status == 202, status
        client.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests/s": len(latencies) / elapsed,
        "p50 ms": statistics.median(latencies) * 1000,
        "p99 ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


async def _group(hub: BenchHub, name: str, size: int) -> None:
    headers = {"Authorization": f"Bearer {hub.admin_key}"}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=60) as client:
        existing = await client.get(f"/v1/admin/groups/{name}/members")
        if existing.status_code == 200 and existing.json()["members"]:
            return
        (await client.put(f"/v1/admin/groups/{name}")).raise_for_status()
        for start in range(0, size, 10_000):
            users = [f"{name}-u{i}" for i in range(start, min(start + 10_000, size))]
            response = await client.post(f"/v1/admin/groups/{name}/members", json={"add": users})
            response.raise_for_status()


async def _topic(hub: BenchHub, name: str, size: int) -> None:
    headers = {"Authorization": f"Bearer {hub.admin_key}"}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=120) as client:
        if (await client.get(f"/v1/admin/topics/{name}")).status_code == 200:
            return
        (await client.put(f"/v1/admin/topics/{name}", json={})).raise_for_status()
        for start in range(0, size, 10_000):
            users = [f"{name}-u{i}" for i in range(start, min(start + 10_000, size))]
            response = await client.patch(
                f"/v1/admin/topics/{name}", json={"add": {"users": users}}
            )
            response.raise_for_status()


async def _timed_post(hub: BenchHub, recipients: dict[str, list[str]], size: int) -> float:
    headers = {"Authorization": f"Bearer {hub.publish_key}"}
    body = {"recipients": recipients, "title": "to everyone", "body": "x" * 200}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=120) as client:
        started = time.perf_counter()
        response = await client.post("/v1/notifications", json=body)
        elapsed = time.perf_counter() - started
    assert response.status_code == 202, response.text
    assert response.json()["recipients"] == size
    return elapsed


async def topic_vs_group(hub: BenchHub, size: int = 100_000) -> dict[str, float]:
    """The same fan-out through a topic and through a group, back to back."""
    await _group(hub, f"g{size}", size)
    await _topic(hub, f"t{size}", size)
    group_s = await _timed_post(hub, {"groups": [f"g{size}"]}, size)
    topic_s = await _timed_post(hub, {"topics": [f"t{size}"]}, size)
    return {"group seconds": group_s, "topic seconds": topic_s, "topic / group": topic_s / group_s}


def fan_out(size: int) -> Callable[[BenchHub], Awaitable[dict[str, float]]]:
    async def scenario(hub: BenchHub) -> dict[str, float]:
        name = f"g{size}"
        await _group(hub, name, size)
        headers = {"Authorization": f"Bearer {hub.publish_key}"}
        body = {"recipients": {"groups": [name]}, "title": "to everyone", "body": "x" * 200}
        async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=120) as client:
            started = time.perf_counter()
            response = await client.post("/v1/notifications", json=body)
            elapsed = time.perf_counter() - started
        assert response.status_code == 202, response.text
        assert response.json()["recipients"] == size
        return {"seconds": elapsed, "recipients/s": size / elapsed}

    return scenario


async def idle_streams(hub: BenchHub, count: int = 1000) -> dict[str, float]:
    """RSS growth of a freshly started hub per idle stream (distinct users)."""
    await hub.restart()
    await asyncio.sleep(0.5)
    before = hub.rss_kib()
    run = uuid.uuid4().hex[:6]
    conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    parts = urlsplit(hub.base_url)
    for i in range(count):
        token = hub.tokens.mint_user_token(f"idle-{run}-{i}")
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        request = f"GET /v1/me/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
        writer.write(request.encode())
        conns.append((reader, writer))
    for reader, _ in conns:  # wait for each stream's first event
        await reader.readuntil(b"event: counts")
    await asyncio.sleep(0.5)
    after = hub.rss_kib()
    for _, writer in conns:
        writer.close()
    await asyncio.sleep(1.0)
    return {"streams": float(count), "KiB per stream": (after - before) / count}


ALL: list[tuple[str, Callable[[BenchHub], Awaitable[dict[str, float]]]]] = [
    ("ingest, 1 recipient, 32 connections", ingest),
    ("fan-out to a 10k group", fan_out(10_000)),
    ("fan-out to a 100k group", fan_out(100_000)),
    ("100k fan-out, topic vs group", topic_vs_group),
    ("1k idle streams", idle_streams),
]


def _delayed_store(hub: BenchHub) -> tuple[Redis, DelayedStore]:
    redis = Redis.from_url(str(hub.settings.redis_url))
    store = DelayedStore(redis, Keys(hub.settings.redis_prefix), hub.settings.delayed.sets)
    return redis, store


async def _load(store: DelayedStore, topic: str, due_ms: list[int]) -> list[str]:
    """Queue messages straight into Redis (the mover's input; PostgreSQL is not measured)."""
    ids = [str(ULID()) for _ in due_ms]
    for start in range(0, len(ids), 5000):
        batch = range(start, min(start + 5000, len(ids)))
        await store.push_many(
            [
                (ids[i], topic, orjson.dumps({"id": ids[i], "body": i}), due_ms[i], 0, 60_000)
                for i in batch
            ]
        )
    return ids


async def _ready_count(redis: Redis, hub: BenchHub, topic: str) -> int:
    keys = Keys(hub.settings.redis_prefix)
    counts = [
        await redis.zcard(keys.delayed(i).ready(topic)) for i in range(hub.settings.delayed.sets)
    ]
    return sum(counts)


async def burst_due(hub: BenchHub, count: int = 100_000) -> dict[str, float]:
    """100k messages due in the same instant: how long until the last is ready."""
    redis, store = _delayed_store(hub)
    topic = f"burst-{uuid.uuid4().hex[:6]}"
    due = int(time.time() * 1000) + 8000 + count // 20  # after loading completes
    await _load(store, topic, [due] * count)
    while int(time.time() * 1000) < due:
        await asyncio.sleep(0.005)
    while await _ready_count(redis, hub, topic) < count:
        await asyncio.sleep(0.005)
    all_ready_ms = time.time() * 1000 - due
    await redis.aclose()
    return {"messages": float(count), "all ready after ms": all_ready_ms}


async def lateness(hub: BenchHub, rate: int = 5000, seconds: int = 4) -> dict[str, float]:
    """Messages due at `rate`/s; a consumer long-polls over HTTP and records lateness."""
    redis, store = _delayed_store(hub)
    topic = f"late-{uuid.uuid4().hex[:6]}"
    start = int(time.time() * 1000) + 6000
    total = rate * seconds
    ids = await _load(store, topic, [start + i * 1000 // rate for i in range(total)])
    due_of = {message_id: start + i * 1000 // rate for i, message_id in enumerate(ids)}
    late: list[float] = []
    headers = {"Authorization": f"Bearer {hub.consume_key}"}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=30) as client:
        while len(late) < total:
            response = await client.get(
                f"/v1/topics/{topic}/messages", params={"wait": 5, "max": 100}
            )
            now = time.time() * 1000
            late += [now - due_of[m["id"]] for m in response.json()["messages"]]
    await redis.aclose()
    late.sort()
    return {
        "due/s": float(rate),
        "p50 late ms": late[len(late) // 2],
        "p99 late ms": late[int(len(late) * 0.99) - 1],
        "max late ms": late[-1],
    }


async def delayed_push(hub: BenchHub, total: int = 3000, concurrency: int = 32) -> dict[str, float]:
    """POST /v1/delayed at fixed concurrency: each push commits to PostgreSQL first."""
    headers = {"Authorization": f"Bearer {hub.publish_key}", "Content-Type": "application/json"}
    body = orjson.dumps({"topic": "bench-push", "body": {"x": 1}, "delay_ms": 3_600_000})
    remaining = total
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal remaining
        client = RawClient(hub.base_url)
        await client.connect()
        while remaining > 0:
            remaining -= 1
            assert await client.request("POST", "/v1/delayed", headers, body) == 201
        client.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"pushes/s": total / (time.perf_counter() - started)}


ALL += [
    ("delayed: push, 32 connections", delayed_push),
    ("delayed: 100k due at once", burst_due),
    ("delayed: 5k due/s, HTTP consumer", lateness),
]
