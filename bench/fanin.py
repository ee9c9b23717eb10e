"""Issue 38's rows: broadcasts over several hub processes, and what each hears of the others.

A hub process hears the doorbell shards of its streams' users (store/doorbells.py), plus
the common channel that carries a broadcast's batches to every process; and a broadcast
to 20,000 users or more (`limits.defer_fanout_at`) is deferred (its copies left pending;
announced by the processes holding its streams). These rows measure both
(docs/scaling.md, "Doorbell fan-in"):

- `broadcast to <S> streams over <P> processes`: P `notifyhub serve` processes on one
  Redis and one database (as users run them), the streams of a group's S members split
  evenly over them (each process's share held by its own generators), one POST to the
  group through the first: p50 / p99 / last stream, POST time, each process's RSS and
  the doorbell bytes it read, all and for its own streams (`/metrics`,
  `notifyhub_doorbell_bytes_total{local}`).
- `doorbell fan-in at <P> processes`: the streams spread evenly as above; one broadcast to
  them all, then single-user POSTs (500/s for 4 s) to random ones among them; for each
  phase, the bytes each process read over the bytes for its own streams ("read / own"),
  the worst process's.
- `broadcast, 5k streams: group of 5k vs group of 50k`: the same 5,000 streams on one
  hub, one POST to a group of just them and one to a group of 50,000 holding them: each
  one's p99 and the ratio (the 50k one is deferred: announced by the hub holding the
  streams, its copies pending).
- `broadcast to a 100k group: POST time and exact counts`: the POST's time, then 1,000
  random members' counts and newest item against theirs before, and the routing trace's
  totals.
- `steady 500/s while a 100k group is placed`: the steady row's load (single-user POSTs
  to 1,000 streams of users outside the group) for 4 s alone, then 4 s with a POST to a
  100k group leaving half a second in: the steady events' p99 and the single-user POSTs'
  p99 round trip, during over idle, and the Redis failures the hub counted meanwhile.

`python -m bench --processes P --streams S` sizes the two multi-process rows (2
processes and 10,000 / 2,000 streams by default; each process holds at most
`streams.stream_cap()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from bench import scenarios, streams
from bench.clients import RawClient, make_group, member_names, placed, quantile
from bench.hubproc import BenchHub, rss_kib
from bench.report import Measured

PROCESSES = 2
BROADCAST_STREAMS = 10_000
FANIN_STREAMS = 2_000
STEADY_RATE, STEADY_SECONDS = 500, 4
SAMPLE = 1_000
"""Users whose counts and newest item the 100k broadcast row checks."""
READERS = 32
"""Concurrent reads of those users' inboxes."""

Scenario = Callable[[BenchHub], Awaitable[dict[str, float] | Measured]]


async def _metric_lines(hub: BenchHub) -> list[str]:
    """The hub's `/metrics`, a line each."""
    async with httpx.AsyncClient(base_url=hub.base_url, timeout=30) as client:
        return (await client.get("/metrics")).text.splitlines()


async def doorbell_bytes(hub: BenchHub) -> tuple[float, float]:
    """The doorbell bytes a hub read: (for its own streams, for others')."""
    found = {"true": 0.0, "false": 0.0}
    for line in await _metric_lines(hub):
        if line.startswith("notifyhub_doorbell_bytes_total{"):
            name, value = line.rsplit(" ", 1)
            found[name.split('local="')[1][:-2]] = float(value)
    return found["true"], found["false"]


async def settled_bytes(hubs: list[BenchHub]) -> list[tuple[float, float]]:
    """Each hub's doorbell bytes once none has moved for 0.3 s (the last doorbells, the
    copies' counts after an announcement, arrive after the last stream's event)."""
    last = [await doorbell_bytes(h) for h in hubs]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        await asyncio.sleep(0.3)
        now = [await doorbell_bytes(h) for h in hubs]
        if now == last:
            break
        last = now
    return last


def _read_over_own(before: tuple[float, float], after: tuple[float, float]) -> float:
    """Bytes a process read over those for its own streams, between two readings."""
    own = after[0] - before[0]
    read = own + after[1] - before[1]
    return read / own if own else math.nan


def _worst(ratios: list[float]) -> float:
    """The highest ratio; NaN when a process read nothing for its own streams."""
    return math.nan if any(math.isnan(r) for r in ratios) else max(ratios)


class Spread:
    """Streams of `users` split evenly over `hubs` (user i on hub i % len(hubs))."""

    def __init__(self, hubs: list[BenchHub], users: list[str]) -> None:
        self.hubs = hubs
        self.shares = [users[i :: len(hubs)] for i in range(len(hubs))]
        self.fleets: list[streams.StreamFleet] = []

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Spread]:
        cap = streams.stream_cap()
        if max(len(s) for s in self.shares) > cap:
            raise ValueError(f"at most {cap:,} streams a process here: use more processes")
        async with contextlib.AsyncExitStack() as stack:
            for hub, users in zip(self.hubs, self.shares, strict=True):
                self.fleets.append(
                    await stack.enter_async_context(streams.StreamFleet.open(hub, users))
                )
            await asyncio.sleep(1.0)
            yield self

    async def collect(self) -> list[float]:
        """Latencies (ms, sorted) of one notification event on every stream."""
        parts = await asyncio.gather(
            *(f.collect(f.size, timeout_s=streams.COLLECT_TIMEOUT_S) for f in self.fleets)
        )
        return sorted(ms for part in parts for ms in part)

    async def alive(self) -> int:
        return sum(await asyncio.gather(*(f.alive() for f in self.fleets)))


async def _stamped_post(hub: BenchHub, recipients: dict[str, list[str]]) -> tuple[int, float]:
    """POST one stamped notification (bench/streams.py): its status and wall time."""
    client = RawClient(hub.base_url)
    await client.connect()
    try:
        started = time.perf_counter()
        status = await streams._post(client, hub, recipients)
        return status, time.perf_counter() - started
    finally:
        client.close()


async def _broadcast(spread: Spread, group: str) -> tuple[dict[str, float], list[float]]:
    """One stamped POST to `group` through the first hub; every stream's latency."""
    status, post_s = await _stamped_post(spread.hubs[0], {"groups": [group]})
    latencies = await spread.collect() if status == 202 else []
    size = sum(len(s) for s in spread.shares)
    return {
        "POST status": float(status),
        "POST seconds": post_s,
        "received": float(len(latencies)),
        **streams._spread(latencies, size),
    }, latencies


def broadcast_over(processes: int, size: int) -> Scenario:
    """`size` streams over `processes` hub processes, one broadcast to them all."""

    async def scenario(_: BenchHub) -> Measured:
        prefix = f"nhbench:{uuid.uuid4().hex[:8]}:"
        group = f"mbcast{size}"
        async with BenchHub.start_many(prefix, processes=processes) as hubs:
            await make_group(hubs[0], group, size)
            async with Spread(hubs, member_names(group, size)).open() as spread:
                alive = await spread.alive()
                before = [await doorbell_bytes(h) for h in hubs]
                measured, latencies = await _broadcast(spread, group)
                after = await settled_bytes(hubs)
                rss = [rss_kib(h.pid) / 1024 for h in hubs]
        metrics = {"streams": float(size), "processes": float(processes)}
        metrics |= {"alive at POST": float(alive), **measured}
        for i, (b, a, mib) in enumerate(zip(before, after, rss, strict=True)):
            metrics[f"process {i + 1} RSS MiB"] = mib
            metrics[f"process {i + 1} doorbell KiB read"] = (a[0] + a[1] - b[0] - b[1]) / 1024
            metrics[f"process {i + 1} doorbell KiB own"] = (a[0] - b[0]) / 1024
        ratios = [_read_over_own(b, a) for b, a in zip(before, after, strict=True)]
        metrics["read / own, worst process"] = _worst(ratios)
        return Measured(metrics, {"latency ms": streams._cdf(latencies)})

    return scenario


def fan_in(processes: int, size: int) -> Scenario:
    """Doorbell bytes each process reads over those for its own streams: a broadcast to
    all `size` streams, then single-user POSTs to random ones of them."""

    async def scenario(_: BenchHub) -> dict[str, float]:
        prefix = f"nhbench:{uuid.uuid4().hex[:8]}:"
        group = f"fanin{size}"
        users = member_names(group, size)
        async with BenchHub.start_many(prefix, processes=processes) as hubs:
            await make_group(hubs[0], group, size)
            async with (
                Spread(hubs, users).open() as spread,
                streams.Publisher.open(hubs[0]) as publisher,
            ):
                start = [await doorbell_bytes(h) for h in hubs]
                measured, _ = await _broadcast(spread, group)
                broadcast = await settled_bytes(hubs)
                sent, _, refused = await publisher.run(
                    users, STEADY_RATE, STEADY_RATE * STEADY_SECONDS
                )
                steady = await settled_bytes(hubs)
        phases = {"broadcast": (start, broadcast), "single-user": (broadcast, steady)}
        phases["all"] = (start, steady)
        metrics = {"streams": float(size), "processes": float(processes)}
        metrics |= {"broadcast received": measured["received"], "single-user sent/s": sent}
        metrics["single-user refused"] = float(refused)
        for phase, (before, after) in phases.items():
            ratios = [_read_over_own(b, a) for b, a in zip(before, after, strict=True)]
            read = [a[0] + a[1] - b[0] - b[1] for b, a in zip(before, after, strict=True)]
            metrics[f"{phase}: KiB read per process"] = sum(read) / len(read) / 1024
            metrics[f"{phase}: read / own, worst process"] = _worst(ratios)
        return metrics

    return scenario


async def _group_of(hub: BenchHub, name: str, users: list[str]) -> None:
    """Group `name` of exactly `users` (kept when it already has members)."""
    headers = {"Authorization": f"Bearer {hub.admin_key}"}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=60) as client:
        existing = await client.get(f"/v1/admin/groups/{name}/members")
        if existing.status_code == 200 and existing.json()["members"]:
            return
        (await client.put(f"/v1/admin/groups/{name}")).raise_for_status()
        for start in range(0, len(users), 10_000):
            batch = users[start : start + 10_000]
            response = await client.post(f"/v1/admin/groups/{name}/members", json={"add": batch})
            response.raise_for_status()
    await hub.vacuum()


async def small_vs_big_group(hub: BenchHub, streams_n: int = 5_000, big: int = 50_000) -> Measured:
    """The same `streams_n` streams; a POST to a group of just them, then one to a group of
    `big` users holding them: each one's latencies to the streams."""
    big_group, small_group = f"sv{big}", f"sv{big}-first{streams_n}"
    await make_group(hub, big_group, big)
    users = member_names(big_group, streams_n)
    await _group_of(hub, small_group, users)
    metrics = {"streams": float(streams_n)}
    series: dict[str, list[float]] = {}
    async with Spread([hub], users).open() as spread:
        metrics["alive at POST"] = float(await spread.alive())
        for label, group in (
            (f"{streams_n // 1000}k", small_group),
            (f"{big // 1000}k", big_group),
        ):
            await settled_bytes([hub])  # each from a quiet hub: not amid the last one's counts
            measured, latencies = await _broadcast(spread, group)
            for name, value in measured.items():
                metrics[f"group of {label}: {name}"] = value
            series[f"group of {label} latency ms"] = streams._cdf(latencies)
        await placed(hub)  # the 50k's copies, before its streams close: the next run's
        # streams would take a late one as a new event (counted, seconds late)
    small, large = (f"group of {streams.thousands(n)}: p99 ms" for n in (streams_n, big))
    metrics["p99 big / small"] = metrics[large] / metrics[small]
    return Measured(metrics, series)


async def _inbox_states(hub: BenchHub, users: list[str]) -> list[tuple[Any, Any]]:
    """Each user's (counts, newest item id), read as that user, READERS at a time."""
    gate = asyncio.Semaphore(READERS)
    async with httpx.AsyncClient(base_url=hub.base_url, timeout=60) as client:

        async def state(user: str) -> tuple[Any, Any]:
            auth = {"Authorization": f"Bearer {hub.tokens.mint_user_token(user, ttl_s=3600)}"}
            async with gate:
                counts = await client.get("/v1/me/notifications/counts", headers=auth)
                page = await client.get("/v1/me/notifications?limit=1", headers=auth)
            counts.raise_for_status()
            page.raise_for_status()
            items = page.json()["items"]
            body = counts.json()
            return (body["unread"], body["unseen"], body["total"]), (
                items[0]["id"] if items else None
            )

        return list(await asyncio.gather(*(state(u) for u in users)))


async def exact_100k(hub: BenchHub, size: int = 100_000) -> dict[str, float]:
    """A POST to a 100k group: its time, then, once its copies are all written, a sample
    of its members' counts and newest item, each against the same user's before, and the
    routing trace's totals."""
    group = f"exact{size // 1000}k"
    await make_group(hub, group, size)
    sample = random.sample(member_names(group, size), SAMPLE)
    before = await _inbox_states(hub, sample)
    headers = {"Authorization": f"Bearer {hub.publish_key}"}
    body = {"recipients": {"groups": [group]}, "title": "to everyone", "body": "x" * 200}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=120) as client:
        started = time.perf_counter()
        response = await client.post("/v1/notifications", json=body)
        post_s = time.perf_counter() - started
        response.raise_for_status()
        accepted = response.json()
        await placed(hub, accepted["id"])
        placed_s = time.perf_counter() - started
        admin = {"Authorization": f"Bearer {hub.admin_key}"}
        trace = await client.get(f"/v1/admin/notifications/{accepted['id']}/trace", headers=admin)
        trace.raise_for_status()
    after = await _inbox_states(hub, sample)
    wrong = 0
    for (counts_before, _), (counts_after, newest) in zip(before, after, strict=True):
        grew = tuple(a - b for a, b in zip(counts_after, counts_before, strict=True))
        wrong += grew != (1, 1, 1) or newest != accepted["id"]
    outcomes = trace.json()["outcomes"]
    return {
        "recipients": float(accepted["recipients"]),
        "POST seconds": post_s,
        "placed after seconds": placed_s,
        "users checked": float(SAMPLE),
        "users with wrong counts or newest item": float(wrong),
        "trace resolved": float(trace.json()["resolved"]),
        "trace delivered + pending": float(outcomes["delivered"] + outcomes["pending"]),
    }


async def _redis_trouble(hub: BenchHub) -> float:
    """What the hub has counted as Redis failing it so far: requests answered 503 for
    Redis, and worker loop passes that raised (a rate-limit check that times out is both
    logged and, for the request, a 503)."""
    total = 0.0
    for line in await _metric_lines(hub):
        unavailable = line.startswith('notifyhub_http_unavailable_total{dependency="redis"')
        if unavailable or line.startswith("notifyhub_loop_errors_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def steady_during_100k(
    hub: BenchHub, size: int = 100_000, rate: int = STEADY_RATE, seconds: int = STEADY_SECONDS
) -> dict[str, float]:
    """The steady row's load (`rate` single-user POSTs/s to 1,000 streams of users outside
    the group) for `seconds`, once alone and once with a POST to a 100k group leaving
    half a second into the window: the steady events' p99 and the single-user POSTs'
    round trips, idle against during; and when the 100k copies were all written (within
    the window: the row is void past it)."""
    group = f"starve{size // 1000}k"
    await make_group(hub, group, size)
    users = [f"steady-{uuid.uuid4().hex[:6]}-{i}" for i in range(1000)]
    headers = {"Authorization": f"Bearer {hub.publish_key}"}
    body = {"recipients": {"groups": [group]}, "title": "to everyone", "body": "x" * 200}
    trouble_before = await _redis_trouble(hub)
    async with (
        streams.StreamFleet.open(hub, users) as fleet,
        streams.Publisher.open(hub) as publisher,
        httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=120) as client,
    ):
        await asyncio.sleep(1.0)
        idle = await streams.steady_window(publisher, fleet, users, rate, seconds)
        during = asyncio.create_task(streams.steady_window(publisher, fleet, users, rate, seconds))
        await asyncio.sleep(streams.WARM_UP_S + 0.5)
        started = time.perf_counter()
        response = await client.post("/v1/notifications", json=body)
        response.raise_for_status()
        post_s = time.perf_counter() - started
        await placed(hub, response.json()["id"])
        placed_s = time.perf_counter() - started
        busy = await during
    metrics = {"100k POST seconds": post_s, "100k placed after seconds": placed_s}
    for label, (achieved, post_ms, refused, latencies) in (("idle", idle), ("during", busy)):
        expected = rate * seconds - refused
        spread = streams._spread(latencies, expected)
        metrics[f"{label}: sent/s"] = achieved
        metrics[f"{label}: refused"] = float(refused)
        metrics[f"{label}: p99 ms"] = spread["p99 ms"]
        metrics[f"{label}: POST p99 ms"] = quantile(post_ms, 0.99) if post_ms else math.nan
    for name in ("p99", "POST p99"):
        busy_ms, idle_ms = metrics[f"during: {name} ms"], metrics[f"idle: {name} ms"]
        metrics[f"{name} during / idle"] = busy_ms / idle_ms
    metrics["Redis failures counted"] = await _redis_trouble(hub) - trouble_before
    return metrics


_MINE: list[tuple[str, Scenario]] = []


def configure(processes: int = PROCESSES, streams_n: int | None = None) -> None:
    """(Re)register the rows, the multi-process ones at `processes` and `streams_n`
    (`python -m bench --processes --streams`)."""
    for entry in _MINE:
        scenarios.ALL.remove(entry)
    broadcast_n = streams_n or BROADCAST_STREAMS
    fanin_n = streams_n or FANIN_STREAMS
    _MINE[:] = [
        (
            f"broadcast to {streams.thousands(broadcast_n)} streams over {processes} processes",
            broadcast_over(processes, broadcast_n),
        ),
        (f"doorbell fan-in at {processes} processes", fan_in(processes, fanin_n)),
        ("broadcast, 5k streams: group of 5k vs group of 50k", small_vs_big_group),
        ("broadcast to a 100k group: POST time and exact counts", exact_100k),
        ("steady 500/s while a 100k group is placed", steady_during_100k),
    ]
    scenarios.ALL.extend(_MINE)


configure()
