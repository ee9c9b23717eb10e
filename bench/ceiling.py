"""Ingest against the stack's ceiling: the hub and a bare FastAPI + EVALSHA app, same run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx
import orjson

from bench.clients import LoadResult, closed_loop
from bench.hubproc import _free_port

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

TOTAL = 4000
CONCURRENCY = 32
WARM_UP = 300
ROUNDS = 4
BODY = orjson.dumps({"recipients": {"users": ["bench-one"]}, "title": "hello", "body": "x" * 200})


@contextlib.asynccontextmanager
async def bare_app(hub: BenchHub) -> AsyncIterator[str]:
    """The bare app in its own process, on the hub's Redis under the hub's key prefix."""
    port = _free_port()
    env = {
        **os.environ,
        "BENCH_BARE_REDIS_URL": str(hub.settings.redis_url),
        "BENCH_BARE_PREFIX": hub.settings.redis_prefix + "bare:",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.bareapp", "--port", str(port), env=env
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        await _wait_listening(base_url)
        yield base_url
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 15)


async def _wait_listening(base_url: str) -> None:
    async with httpx.AsyncClient() as client, asyncio.timeout(30):
        while True:
            with contextlib.suppress(httpx.TransportError):
                await client.get(f"{base_url}/docs")
                return
            await asyncio.sleep(0.1)


async def _load(base_url: str, headers: dict[str, str], total: int) -> LoadResult:
    return await closed_loop(
        base_url,
        "/v1/notifications",
        headers,
        BODY,
        total=total,
        concurrency=CONCURRENCY,
        expect=202,
    )


async def ingest_vs_bare(hub: BenchHub) -> dict[str, float]:
    """Single-recipient POSTs at fixed concurrency, hub and bare app in alternating rounds
    (so both see the same background load), after a warm-up of each."""
    hub_headers = {"Authorization": f"Bearer {hub.publish_key}", "Content-Type": "application/json"}
    bare_headers = {"Content-Type": "application/json"}
    ours = bare = LoadResult([], 0.0)
    async with bare_app(hub) as bare_url:
        await _load(hub.base_url, hub_headers, WARM_UP)
        await _load(bare_url, bare_headers, WARM_UP)
        for _ in range(ROUNDS):
            ours += await _load(hub.base_url, hub_headers, TOTAL // ROUNDS)
            bare += await _load(bare_url, bare_headers, TOTAL // ROUNDS)
    return {
        "requests/s": ours.requests_per_s,
        "p50 ms": ours.p50_ms,
        "p99 ms": ours.p99_ms,
        "bare requests/s": bare.requests_per_s,
        "bare p50 ms": bare.p50_ms,
        "bare p99 ms": bare.p99_ms,
        "hub / bare": ours.requests_per_s / bare.requests_per_s,
    }
