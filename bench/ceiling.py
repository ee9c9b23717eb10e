"""Ingest against the stack's ceiling: the hub and a bare FastAPI + EVALSHA app, same run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import orjson

from bench.clients import LoadResult, closed_loop
from bench.hubproc import _free_port
from bench.report import Skipped

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

TOTAL = 4000
CONCURRENCY = 32
WARM_UP = 300
ROUNDS = 4
BODY = orjson.dumps({"recipients": {"users": ["bench-one"]}, "title": "hello", "body": "x" * 200})


@contextlib.asynccontextmanager
async def bare_app(hub: BenchHub, module: str = "bench.bareapp") -> AsyncIterator[str]:
    """A bare app (bench/bareapp.py, or `module`) in its own process, on the hub's Redis
    under the hub's key prefix."""
    port = _free_port()
    env = {
        **os.environ,
        "BENCH_BARE_REDIS_URL": str(hub.settings.redis_url),
        "BENCH_BARE_PREFIX": hub.settings.redis_prefix + "bare:",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, "--port", str(port), env=env
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


WRK = shutil.which("wrk")
WRK_ROUNDS = 9
WRK_SECONDS = 3
WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = '{body}'
wrk.headers["Content-Type"] = "application/json"
{auth}
"""


async def _wrk(base_url: str, workdir: Path, auth: str | None) -> float:
    """Requests/s of one `wrk -t1 -c32` round of POSTs (non-2xx answers fail the run)."""
    script = workdir / ("hub.lua" if auth else "floor.lua")
    header = f'wrk.headers["Authorization"] = "Bearer {auth}"' if auth else ""
    script.write_text(WRK_SCRIPT.format(body=BODY.decode(), auth=header))
    proc = await asyncio.create_subprocess_exec(
        str(WRK), "-t1", f"-c{CONCURRENCY}", f"-d{WRK_SECONDS}s", "-s", str(script),
        f"{base_url}/v1/notifications",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await proc.communicate()
    text = out.decode()
    if "Non-2xx" in text:
        raise RuntimeError(f"wrk saw refusals from {base_url}:\n{text}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", text)[1])  # type: ignore[index]


async def ingest_vs_floor(hub: BenchHub) -> dict[str, float]:
    """The hub against the minimal floor (bench/floorapp.py): wrk -c32, alternating rounds
    of WRK_SECONDS each, after a warm-up round of each; the ratio of the median rates."""
    if WRK is None:
        raise Skipped("wrk is not installed (Debian: apt-get install wrk)")
    ours, floor = [], []
    with tempfile.TemporaryDirectory(prefix="nhbench-wrk-") as tmp:
        workdir = Path(tmp)
        async with bare_app(hub, "bench.floorapp") as floor_url:
            await _wrk(hub.base_url, workdir, hub.publish_key)
            await _wrk(floor_url, workdir, None)
            for _ in range(WRK_ROUNDS):
                ours.append(await _wrk(hub.base_url, workdir, hub.publish_key))
                floor.append(await _wrk(floor_url, workdir, None))
    hub_rate, floor_rate = statistics.median(ours), statistics.median(floor)
    return {
        "requests/s": hub_rate,
        "floor requests/s": floor_rate,
        "hub / floor": hub_rate / floor_rate,
        "hub / floor, worst round": min(o / f for o, f in zip(ours, floor, strict=True)),
        "hub / floor, best round": max(o / f for o, f in zip(ours, floor, strict=True)),
    }
