"""Load-generator building blocks: a raw HTTP/1.1 client, a closed-loop load, group set-up."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import asyncpg
import httpx
from redis.asyncio import Redis

from notifyhub.store.keys import Keys

if TYPE_CHECKING:
    from bench.hubproc import BenchHub


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


@dataclass(frozen=True)
class LoadResult:
    """Round trips (seconds) of a closed-loop load and the wall time it took."""

    latencies: list[float]
    elapsed_s: float

    @property
    def requests_per_s(self) -> float:
        return len(self.latencies) / self.elapsed_s

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1000

    @property
    def p99_ms(self) -> float:
        return quantile(sorted(self.latencies), 0.99) * 1000

    def __add__(self, other: LoadResult) -> LoadResult:
        """Two loads as one: all their requests over their summed wall time."""
        return LoadResult(self.latencies + other.latencies, self.elapsed_s + other.elapsed_s)


def quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of an already sorted list (nearest rank)."""
    return ordered[max(0, min(len(ordered) - 1, int(len(ordered) * q + 0.5) - 1))]


async def closed_loop(
    base_url: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    *,
    total: int,
    concurrency: int,
    expect: int,
) -> LoadResult:
    """`total` POSTs over `concurrency` keep-alive connections, each waiting for its answer."""
    latencies: list[float] = []
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        client = RawClient(base_url)
        await client.connect()
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            status = await client.request("POST", path, headers, body)
            latencies.append(time.perf_counter() - started)
            assert status == expect, status
        client.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return LoadResult(latencies, time.perf_counter() - started)


def member_names(name: str, size: int) -> list[str]:
    """The users `make_group` puts in group `name`."""
    return [f"{name}-u{i}" for i in range(size)]


PLACED_POLL_S = 0.02
"""How often a row asks whether a deferred fan-out's copies are all written."""


async def placed(hub: BenchHub, nid: str | None = None) -> None:
    """Until a deferred fan-out's copies are all written (after its 202, services/
    fanouts.py): its placement record gone from Redis (what the routing trace's `placing`
    reports; the trace itself costs the hub more a read than a row should add). At once
    for a fan-out that was not deferred. Without `nid`, until every fan-out's are: the
    directory of records (`fanouts`) is empty, so streams opened next do not get an
    earlier broadcast's late copies as new events."""
    keys = Keys(hub.settings.redis_prefix)
    redis = Redis.from_url(str(hub.settings.redis_url))
    try:
        while await (redis.exists(keys.fanout(nid)) if nid else redis.scard(keys.fanouts)):
            await asyncio.sleep(PLACED_POLL_S)
    finally:
        await redis.aclose()


async def make_group(hub: BenchHub, name: str, size: int, tenant: str = "default") -> None:
    """Group `name` of `tenant` with `size` users (kept when it already has members),
    vacuumed."""
    headers = {"Authorization": f"Bearer {hub.admin_key}"}
    params = {"tenant": tenant}
    async with httpx.AsyncClient(
        base_url=hub.base_url, headers=headers, params=params, timeout=60
    ) as client:
        existing = await client.get(f"/v1/admin/groups/{name}/members")
        if existing.status_code == 200 and existing.json()["members"]:
            return
        (await client.put(f"/v1/admin/groups/{name}")).raise_for_status()
        users = member_names(name, size)
        for start in range(0, size, 10_000):
            batch = users[start : start + 10_000]
            response = await client.post(f"/v1/admin/groups/{name}/members", json={"add": batch})
            response.raise_for_status()
    await hub.vacuum()


async def add_addresses(dsn: str, tenant: str, users: list[str]) -> None:
    """Every user's e-mail address (`<user>@bench.test`), in one statement: the admin
    endpoint one by one would time the bench's setup, not what it measures."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO user_profiles (tenant, user_id, email) "
            "SELECT $1, u, u || '@bench.test' FROM unnest($2::text[]) AS u",
            tenant,
            users,
        )
    finally:
        await conn.close()
