"""Stream scenarios: idle streams' memory, a broadcast to every stream, steady publish-to-receive.

The streams live in separate load-generator processes (bench/streamgen.py, uvloop and raw
sockets); each generator connects from its own loopback source address, so tens of
thousands of connections never run out of ephemeral ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import random
import resource
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import orjson

from bench.clients import RawClient, make_group, member_names, quantile
from bench.report import Measured

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

PER_PROCESS = 12_000
FD_MARGIN = 500
WARM_UP = 100
# Stream opens in flight per generator: well below the hub's Redis pool (redis-py's
# default 100 connections, which raises instead of waiting when exhausted); streams the
# hub drops while opening are reopened and counted as `open retries`.
OPEN_PARALLEL = 32
COLLECT_TIMEOUT_S = 20  # an event not received by then counts as lost
STORM_PARALLEL = 512
"""Reconnections in flight per generator in a reconnect storm (all at once, as browsers
whose hub restarted would)."""
WARM_UP_S = 1.0
"""Steady load before a measured window (connections, pools and caches warm up)."""
_SOURCES = iter(f"127.{random.randint(1, 250)}.{random.randint(1, 250)}.{i}" for i in range(1, 255))


def stream_cap() -> int:
    """The most streams one hub process can hold under this machine's hard fd limit."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1] - FD_MARGIN


MOST_STREAMS = 50_000
"""Issue 23's streams in one process, where the fd hard limit allows them."""


def most_streams() -> int:
    """MOST_STREAMS, or as many as `stream_cap` allows."""
    return min(MOST_STREAMS, stream_cap())


def thousands(n: int) -> str:
    """`n` streams as the scenario names write it: 19.5k."""
    return f"{n / 1000:g}k"


class Generator:
    """One `python -m bench.streamgen` process and its JSON-lines conversation."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def spawn(cls) -> Generator:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.streamgen",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**28,
        )
        return cls(proc)

    async def ask(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(orjson.dumps(cmd) + b"\n")
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the stream generator died")
        return orjson.loads(line)  # type: ignore[no-any-return]

    async def stop(self) -> None:
        if self.proc.returncode is None:
            # A generator still busy opening streams answers late: give it 10 s, then kill.
            with contextlib.suppress(RuntimeError, ConnectionError, TimeoutError):
                await asyncio.wait_for(self.ask({"cmd": "close"}), 10)
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


class StreamFleet:
    """`len(users)` live streams, one per user, spread over generator processes."""

    def __init__(self, generators: list[Generator], shares: list[int]) -> None:
        self.generators = generators
        self.shares = shares
        self.open_seconds = 0.0
        self.open_retries = 0

    @property
    def size(self) -> int:
        return sum(self.shares)

    @classmethod
    def open(
        cls, hub: BenchHub, users: list[str], processes: int = 0
    ) -> contextlib.AbstractAsyncContextManager[StreamFleet]:
        """A stream per user on the hub, each with its user token."""
        parts = urlsplit(hub.base_url)
        tokens = [hub.tokens.mint_user_token(u, ttl_s=3 * 3600) for u in users]
        host, port = str(parts.hostname), int(parts.port or 80)
        return cls.open_at(host, port, "/v1/me/stream", tokens, processes)

    @classmethod
    @contextlib.asynccontextmanager
    async def open_at(
        cls, host: str, port: int, path: str, tokens: list[str], processes: int = 0
    ) -> AsyncIterator[StreamFleet]:
        """A stream per token on any server (`path` as bench/streamgen.py takes it), over
        `processes` generators (0: as few as hold them)."""
        count = processes or math.ceil(len(tokens) / PER_PROCESS)
        chunks = [tokens[i::count] for i in range(count)]
        fleet = cls([await Generator.spawn() for _ in chunks], [len(c) for c in chunks])
        try:
            started = time.perf_counter()
            answers = await asyncio.gather(
                *(
                    g.ask(_open_cmd(host, port, path, c))
                    for g, c in zip(fleet.generators, chunks, strict=True)
                )
            )
            fleet.open_seconds = time.perf_counter() - started
            fleet.open_retries = sum(a["retries"] for a in answers)
            failed = sum(a["failed"] for a in answers)
            if failed:
                errors = [a["error"] for a in answers if a["error"]]
                raise RuntimeError(f"{failed} of {len(tokens)} streams failed: {errors[0]}")
            yield fleet
        finally:
            await asyncio.gather(*(g.stop() for g in fleet.generators))

    async def alive(self) -> int:
        """How many of the streams are still open (the hub may have dropped some)."""
        answers = await asyncio.gather(*(g.ask({"cmd": "status"}) for g in self.generators))
        return sum(a["alive"] for a in answers)

    async def resume(
        self, host: str, port: int, expect: int, timeout_s: float
    ) -> list[dict[str, Any]]:
        """Every generator reopens its (cut) streams at once with their last event ids,
        from a fresh source address (bench/streamgen.py `resume`)."""
        return await asyncio.gather(
            *(
                g.ask(
                    {
                        "cmd": "resume",
                        "host": host,
                        "port": port,
                        "src": next(_SOURCES),
                        "parallel": STORM_PARALLEL,
                        "expect": expect,
                        "timeout_s": timeout_s,
                    }
                )
                for g in self.generators
            )
        )

    async def collect(self, expect: int, timeout_s: float) -> list[float]:
        """Latencies (ms) of the next `expect` notification events, sorted."""
        if expect == self.size:
            wanted = self.shares  # a broadcast: one event per stream
        else:
            assert len(self.generators) == 1, "spread events need one generator"
            wanted = [expect]
        answers = await asyncio.gather(
            *(
                g.ask({"cmd": "collect", "expect": n, "timeout_s": timeout_s})
                for g, n in zip(self.generators, wanted, strict=True)
            )
        )
        return sorted(us / 1000 for a in answers for us in a["latencies_us"])


def _open_cmd(host: str, port: int, path: str, tokens: list[str]) -> dict[str, Any]:
    return {
        "cmd": "open",
        "host": host,
        "port": port,
        "src": next(_SOURCES),
        "tokens": tokens,
        "path": path,
        "parallel": OPEN_PARALLEL,
    }


def _label(count: int) -> str:
    return f"{count / 1000:g}k"


def idle_streams(count: int) -> Callable[[BenchHub], Awaitable[dict[str, float]]]:
    """RSS growth of a freshly started hub per idle stream (distinct users)."""

    async def scenario(hub: BenchHub) -> dict[str, float]:
        await hub.restart()
        run = uuid.uuid4().hex[:6]
        async with StreamFleet.open(hub, [f"warm-{run}-{i}" for i in range(WARM_UP)]):
            pass
        await asyncio.sleep(1.0)
        before = hub.rss_kib()
        async with StreamFleet.open(hub, [f"idle-{run}-{i}" for i in range(count)]) as fleet:
            await asyncio.sleep(1.0)
            after = hub.rss_kib()
            alive = await fleet.alive()
        return {
            "streams": float(count),
            "KiB per stream": (after - before) / count,
            "hub RSS MiB": after / 1024,
            "open seconds": fleet.open_seconds,
            "open retries": float(fleet.open_retries),
            "alive at RSS read": float(alive),
            # the same growth over the streams still open: an estimate when the hub dropped some
            "KiB per open stream": (after - before) / alive if alive else math.nan,
        }

    return scenario


def _stamped(recipients: dict[str, list[str]]) -> bytes:
    """A publish body whose title carries the send time (CLOCK_MONOTONIC ns)."""
    title = f"bench:{time.monotonic_ns()}"
    return orjson.dumps({"recipients": recipients, "title": title, "body": "x" * 200})


async def _post(client: RawClient, hub: BenchHub, recipients: dict[str, list[str]]) -> int:
    """POST one stamped notification; returns the status (202 unless the hub refused)."""
    headers = {"Authorization": f"Bearer {hub.publish_key}", "Content-Type": "application/json"}
    return await client.request("POST", "/v1/notifications", headers, _stamped(recipients))


def _cdf(latencies: list[float], points: int = 400) -> list[float]:
    """`points` evenly spaced quantiles of sorted latencies: enough to draw a CDF."""
    if not latencies:
        return []
    return [quantile(latencies, (i + 1) / points) for i in range(points)]


def _spread(latencies: list[float], expected: int) -> dict[str, float]:
    """p50 / p99 / max over `expected` events; events that never came count as infinitely late
    (shown n/a), so losses can never make a quantile look better."""
    padded = latencies + [math.inf] * (expected - len(latencies))
    if not padded:
        return {"p50 ms": math.nan, "p99 ms": math.nan, "max ms": math.nan}
    values = {
        "p50 ms": quantile(padded, 0.5),
        "p99 ms": quantile(padded, 0.99),
        "max ms": padded[-1],
    }
    return {k: v if math.isfinite(v) else math.nan for k, v in values.items()}


async def broadcast(hub: BenchHub, size: int = 10_000) -> Measured:
    """One POST to a group whose every member has a live stream: latency to each stream."""
    name = f"bcast{size}"
    await make_group(hub, name, size)
    client = RawClient(hub.base_url)
    await client.connect()
    async with StreamFleet.open(hub, member_names(name, size)) as fleet:
        await asyncio.sleep(1.0)
        alive = await fleet.alive()
        started = time.perf_counter()
        status = await _post(client, hub, {"groups": [name]})
        post_s = time.perf_counter() - started
        latencies: list[float] = []
        if status == 202:  # a refused POST (the hub's 503) is a result too: nothing arrives
            latencies = await fleet.collect(size, timeout_s=COLLECT_TIMEOUT_S)
    client.close()
    metrics = {
        "streams": float(size),
        "alive at POST": float(alive),
        "POST status": float(status),
        "received": float(len(latencies)),
        "POST seconds": post_s,
        **_spread(latencies, size),
        "received max ms": latencies[-1] if latencies else math.nan,
        "open retries": float(fleet.open_retries),
    }
    return Measured(metrics, {"latency ms": _cdf(latencies)})


class Publisher:
    """Open-loop publishing over 32 keep-alive connections: POST i leaves at
    start + i / rate (or when a connection is free), to a random user of `users`."""

    def __init__(self, hub: BenchHub, clients: list[RawClient]) -> None:
        self.hub = hub
        self.clients = clients

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, hub: BenchHub, connections: int = 32) -> AsyncIterator[Publisher]:
        clients = [RawClient(hub.base_url) for _ in range(connections)]
        try:
            for client in clients:
                await client.connect()
            yield cls(hub, clients)
        finally:
            for client in clients:
                client.close()

    async def run(self, users: list[str], rate: int, total: int) -> tuple[float, list[float], int]:
        """The achieved rate, the accepted POSTs' round trips (ms, sorted) and how many
        the hub refused. The collector stays off meanwhile: a full collection of this
        process's heap once stalled it for 97 ms, and the POSTs it held back then left
        at once, a burst no steady publisher makes."""
        post_ms: list[float] = []
        refused = 0
        pool: asyncio.Queue[RawClient] = asyncio.Queue()
        for client in self.clients:
            pool.put_nowait(client)

        async def one(client: RawClient, user: str) -> None:
            nonlocal refused
            started = time.perf_counter()
            if await _post(client, self.hub, {"users": [user]}) == 202:
                post_ms.append((time.perf_counter() - started) * 1000)
            else:
                refused += 1
            pool.put_nowait(client)

        tasks: list[asyncio.Task[None]] = []
        with _collector_off():
            started = time.perf_counter()
            for i in range(total):
                delay = started + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                client = await pool.get()
                tasks.append(asyncio.create_task(one(client, random.choice(users))))
            elapsed = time.perf_counter() - started
            await asyncio.gather(*tasks)
        return total / elapsed, sorted(post_ms), refused


@contextlib.contextmanager
def _collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def steady_window(
    publisher: Publisher, fleet: StreamFleet, users: list[str], rate: int, seconds: int
) -> tuple[float, list[float], int, list[float]]:
    """`seconds` of `rate` notifications/s after WARM_UP_S of the same load on the same
    connections (its events are received and dropped): the achieved rate, the POST round
    trips, the refused count and the latencies of the events received."""
    warm_up = int(rate * WARM_UP_S)
    _, _, refused = await publisher.run(users, rate, warm_up)
    await fleet.collect(warm_up - refused, timeout_s=COLLECT_TIMEOUT_S)
    total = rate * seconds
    achieved, post_ms, refused = await publisher.run(users, rate, total)
    latencies = await fleet.collect(total - refused, timeout_s=COLLECT_TIMEOUT_S)
    return achieved, post_ms, refused, latencies


async def steady(
    hub: BenchHub, rate: int = 500, seconds: int = 10, streams: int = 1000
) -> Measured:
    """`rate` single-user notifications/s to random users among `streams` live streams."""
    users = [f"steady-{uuid.uuid4().hex[:6]}-{i}" for i in range(streams)]
    total = rate * seconds
    async with StreamFleet.open(hub, users) as fleet, Publisher.open(hub) as publisher:
        await asyncio.sleep(1.0)
        achieved, post_ms, refused, latencies = await steady_window(
            publisher, fleet, users, rate, seconds
        )
    metrics = {
        "sent/s": achieved,
        "received": float(len(latencies)),
        "POST refused": float(refused),
        "POST p50 ms": quantile(post_ms, 0.5) if post_ms else math.nan,
        **_spread(latencies, total),
        "open retries": float(fleet.open_retries),
    }
    return Measured(metrics, {"latency ms": _cdf(latencies)})


async def _healthz_worst(hub: BenchHub, stop: asyncio.Event) -> float:
    """The slowest `/healthz` answer (ms) while `stop` is unset, one every 20 ms."""
    worst = 0.0
    async with httpx.AsyncClient(base_url=hub.base_url, timeout=10) as client:
        while not stop.is_set():
            started = time.perf_counter()
            (await client.get("/healthz")).raise_for_status()
            worst = max(worst, (time.perf_counter() - started) * 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.02)
    return worst


async def reconnect_storm(hub: BenchHub, size: int = 10_000, missed: int = 5) -> dict[str, float]:
    """Every member of a 10k group holds a stream; the hub restarts (every stream cut), the
    group gets `missed` notifications, then every stream reconnects at once with its
    `Last-Event-ID`: how fast the hub takes them back, when the last one has every missed
    notification, and none lost or doubled; `/healthz` polled throughout."""
    name = f"storm{size}"
    await make_group(hub, name, size)
    parts = urlsplit(hub.base_url)
    host, port = str(parts.hostname), int(parts.port or 80)
    async with StreamFleet.open(hub, member_names(name, size), processes=2) as fleet:
        await asyncio.sleep(1.0)
        await hub.restart()  # every stream is cut
        headers = {"Authorization": f"Bearer {hub.publish_key}"}
        async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=60) as api:
            for n in range(missed):
                body = {"recipients": {"groups": [name]}, "title": f"missed {n}"}
                (await api.post("/v1/notifications", json=body)).raise_for_status()
        stop = asyncio.Event()
        health = asyncio.create_task(_healthz_worst(hub, stop))
        started = time.monotonic_ns()
        answers = await fleet.resume(host, port, missed, timeout_s=COLLECT_TIMEOUT_S)
        stop.set()
        healthz_ms = await health
    reconnected = sum(a["reconnected"] for a in answers)
    caught_up = sum(a["caught_up"] for a in answers)
    answered_s = (max(a["first_byte_ns"] for a in answers) - started) / 1e9
    caught_ns = [a["caught_up_ns"] for a in answers if a["caught_up_ns"]]
    return {
        "streams": float(size),
        "reconnected": float(reconnected),
        "refused or failed": float(size - reconnected),
        "all answered s": answered_s,
        "new streams/s": reconnected / answered_s if answered_s > 0 else math.nan,
        "caught up": float(caught_up),
        "last caught up s": (max(caught_ns) - started) / 1e9 if caught_ns else math.nan,
        "not caught up": float(size - caught_up),
        "duplicated": float(sum(a["duplicates"] for a in answers)),
        "healthz max ms": healthz_ms,
    }
