"""Reliable deliveries: throughput to a local receiver and latency from POST to receipt."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

import httpx
import orjson

from bench import scenarios
from bench.scenarios import RawClient
from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.unit import UnitOfWork
from notifyhub.services.deliveries import enqueue

if TYPE_CHECKING:
    from bench.hubproc import BenchHub


class Sink:
    """A minimal keep-alive HTTP/1.1 webhook receiver: records when each `i` arrived."""

    def __init__(self) -> None:
        self.arrived: dict[int, float] = {}
        self.webhook_ids: set[str] = set()
        self._server: asyncio.Server | None = None
        self.changed = asyncio.Event()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/hook"

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readline():
                length, webhook_id = 0, ""
                while (raw := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = raw.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                    elif name.lower() == b"webhook-id":
                        webhook_id = value.strip().decode()
                body = await reader.readexactly(length)
                self.arrived.setdefault(orjson.loads(body)["i"], time.perf_counter())
                self.webhook_ids.add(webhook_id)
                self.changed.set()
                writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def wait(self, count: int, timeout_s: float = 120.0) -> None:
        async with asyncio.timeout(timeout_s):
            while len(self.arrived) < count:
                self.changed.clear()
                await self.changed.wait()


async def _define(hub: BenchHub, url: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=hub.base_url, timeout=30) as client:
        response = await client.put(
            f"/v1/admin/delivery-definitions/{name}",
            json={"url": url, "timeout_s": 10, "retry_intervals": "1s"},
            headers={"Authorization": f"Bearer {hub.admin_key}"},
        )
    response.raise_for_status()
    return name


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


async def _post_all(
    hub: BenchHub, name: str, first: int, total: int, concurrency: int
) -> dict[int, float]:
    """POST deliveries `first`..`first + total` at `concurrency`; when each was sent."""
    headers = {"Authorization": f"Bearer {hub.publish_key}", "Content-Type": "application/json"}
    posted: dict[int, float] = {}
    numbers = iter(range(first, first + total))

    async def worker() -> None:
        client = RawClient(hub.base_url)
        await client.connect()
        for i in numbers:
            body = orjson.dumps({"definition": name, "payload": {"i": i, "pad": "x" * 200}})
            posted[i] = time.perf_counter()
            assert await client.request("POST", "/v1/deliveries", headers, body) == 202
        client.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return posted


async def _backlog(hub: BenchHub, name: str, first: int, total: int) -> float:
    """Commit `total` deliveries in one library-mode transaction; the commit's time."""
    engine = create_engine(str(hub.settings.database_url))
    try:
        async with UnitOfWork(create_sessionmaker(engine)) as unit:
            for i in range(first, first + total):
                await enqueue(unit, name, {"i": i, "pad": "x" * 200})
        return time.perf_counter()
    finally:
        await engine.dispose()


async def deliveries(
    hub: BenchHub, backlog: int = 5000, sequential: int = 300, total: int = 3000
) -> dict[str, float]:
    """Three measurements against one local receiver:
    - dispatcher rate: a backlog committed in one transaction, drained by the hub's one
      dispatcher (commit to last receipt);
    - latency: POSTs one at a time, POST sent to webhook received (p50/p99);
    - POST-driven rate: `total` POSTs on 32 connections, first POST to last receipt (each
      POST is a durable commit, so this is bounded like any write endpoint here)."""
    sink = Sink()
    name = await _define(hub, await sink.start())
    committed_at = await _backlog(hub, name, 0, backlog)
    await sink.wait(backlog)
    dispatcher_rate = backlog / (max(sink.arrived.values()) - committed_at)
    idle = await _post_all(hub, name, backlog, sequential, 1)
    await sink.wait(backlog + sequential)
    idle_ms = [(sink.arrived[i] - t) * 1000 for i, t in idle.items()]
    first = backlog + sequential
    started = time.perf_counter()
    await _post_all(hub, name, first, total, 32)
    await sink.wait(first + total)
    posted_rate = total / (max(sink.arrived.values()) - started)
    await sink.close()
    return {
        "dispatcher deliveries/s (backlog)": dispatcher_rate,
        "p50 ms POST to receipt": _percentile(idle_ms, 0.5),
        "p99 ms POST to receipt": _percentile(idle_ms, 0.99),
        "POST-driven deliveries/s (32 connections)": posted_rate,
    }


scenarios.ALL += [("deliveries: local receiver, one dispatcher", deliveries)]
