"""Pushpin side by side: one broadcast to N SSE streams through Pushpin and through the hub.

Pushpin (Debian's `pushpin` package, a GRIP proxy) runs in its own temporary directory
with its default settings but its ports and its send-rate limit lifted, in front of a
small GRIP origin here (`GripOrigin`: every `GET /stream/<channel>` is answered with
`Grip-Hold: stream` and `Grip-Channel: <channel>`, and a first `counts` event so the
load client knows the stream is open). The same stream generators (bench/streamgen.py)
hold N streams on Pushpin, then N on the hub, and the same stamped 200-byte notification
is published:

- Pushpin, one channel: every stream on channel `all`, one item published to it;
- Pushpin, one channel per user: stream i on channel `u<i>`, one publish request carrying
  N items (what a relay must do to address users one by one);
- the hub: a group of N users, one `POST /v1/notifications` to the group (each user gets
  a stored, counted copy in Redis and its seq).

Latency is receipt minus the stamp taken just before the publish request is written; RSS
per stream is the growth of Pushpin's processes (runner, condure, proxy, handler) or of
the hub process while the N streams are open. Skipped (the row kept as it was) when
`pushpin` is not installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import orjson

from bench import scenarios
from bench.clients import RawClient, make_group, member_names
from bench.hubproc import _free_port, rss_kib
from bench.report import Measured, Skipped
from bench.streams import COLLECT_TIMEOUT_S, StreamFleet, _post, _spread

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

PUSHPIN_CONF = Path("/etc/pushpin/pushpin.conf")
INSTALLED = shutil.which("pushpin") is not None and PUSHPIN_CONF.exists()
BODY = "x" * 200
PUBLISH_BATCH = 1000
ZURL_SPECS = {
    "in": ("zurl_out_specs", "in"),
    "in_stream": ("zurl_out_stream_specs", "in_stream"),
    "out": ("zurl_in_specs", "out"),
}
"""zurl's sockets (zurl.conf `<name>_spec`) and the pushpin [proxy] key naming each;
Debian's pushpin reaches origins through a zurl service it does not start itself."""
"""The notification body, as bench/streams.py's broadcast sends it to the hub."""


class GripOrigin:
    """The origin behind Pushpin: holds every stream on the channel its path names."""

    def __init__(self) -> None:
        self.port = _free_port()
        self._server: asyncio.Server | None = None

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while head := await reader.readuntil(b"\r\n\r\n"):
                path = head.split(b" ", 2)[1].decode()
                channel = path.rsplit("/", 1)[-1]
                body = b"event: counts\ndata: {}\n\n"
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Grip-Hold: stream\r\nGrip-Channel: " + channel.encode() + b"\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
                )
                await writer.drain()
        writer.close()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[GripOrigin]:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", self.port)
        async with self._server:
            yield self


class Pushpin:
    """A Pushpin instance of its own: default settings, a temporary run/log dir, free ports."""

    def __init__(self, workdir: Path, origin_port: int) -> None:
        self.workdir = workdir
        self.http_port = _free_port()
        # Pushpin's ZeroMQ/HTTP control ports are 5560-5563 + port_offset.
        self.port_offset = 20_000 + os.getpid() % 10_000
        self.publish_url = f"http://127.0.0.1:{5561 + self.port_offset}/publish/"
        self.origin_port = origin_port
        self.proc: asyncio.subprocess.Process | None = None
        self.procs: list[asyncio.subprocess.Process] = []

    def _config(self) -> Path:
        values = {
            "rundir": str(self.workdir / "run"),
            "logdir": str(self.workdir / "log"),
            "ipc_prefix": f"bench{os.getpid()}-",
            "port_offset": str(self.port_offset),
            "http_port": str(self.http_port),
            "routesfile": str(self.workdir / "routes"),
            # Lifted: by default the handler sends at most 2,500 messages/s (a 5k broadcast
            # would take 2 s by that alone) and queues at most 25,000.
            "message_rate": "10000000",
            "message_hwm": "1000000",
            "client_maxconn": "100000",
        }
        zurl = {name: f"ipc://{self.workdir}/run/zurl-{name}" for name in ZURL_SPECS}
        lines = []
        for line in PUSHPIN_CONF.read_text().splitlines():
            key = line.split("=", 1)[0]
            lines.append(f"{key}={values[key]}" if key in values and "=" in line else line)
            if line.strip() == "[proxy]":  # the origin is reached through our own zurl
                lines += [f"{key}={zurl[name]}" for key, name in ZURL_SPECS.values()]
        for sub in ("run", "log"):
            (self.workdir / sub).mkdir()
        (self.workdir / "routes").write_text(f"* 127.0.0.1:{self.origin_port}\n")
        (self.workdir / "zurl.conf").write_text(
            "[General]\n"
            + "".join(f"{name}_spec={spec}\n" for name, spec in zurl.items())
            + "ipc_file_mode=600\ndefpolicy=allow\nallow=\ndeny=\n"  # loopback origin
            + "max_open_requests=20000\nbuffer_size=200000\ntimeout=600\n"
        )
        conf = self.workdir / "pushpin.conf"
        conf.write_text("\n".join(lines) + "\n")
        return conf

    @classmethod
    @contextlib.asynccontextmanager
    async def run(cls, origin_port: int) -> AsyncIterator[Pushpin]:
        with tempfile.TemporaryDirectory(prefix="nhbench-pushpin-") as tmp:
            pushpin = cls(Path(tmp), origin_port)
            conf = pushpin._config()
            quiet = {"stdout": asyncio.subprocess.DEVNULL, "stderr": asyncio.subprocess.DEVNULL}
            zurl = await asyncio.create_subprocess_exec(
                "zurl", f"--config={pushpin.workdir / 'zurl.conf'}", **quiet
            )
            pushpin.procs = [zurl]
            try:
                pushpin.proc = await asyncio.create_subprocess_exec(
                    "pushpin", "--config", str(conf), **quiet
                )
                pushpin.procs.append(pushpin.proc)
                await pushpin._ready()
                yield pushpin
            finally:
                for proc in reversed(pushpin.procs):
                    await _stop(proc)

    async def _ready(self) -> None:
        """Until a stream opens through it and the publish endpoint answers."""
        async with httpx.AsyncClient() as client, asyncio.timeout(30):
            while True:
                with contextlib.suppress(httpx.TransportError):
                    await client.post(self.publish_url, json={"items": []})
                    async with client.stream(
                        "GET", f"http://127.0.0.1:{self.http_port}/stream/probe"
                    ) as response:
                        if response.status_code == 200:
                            return
                await asyncio.sleep(0.2)

    def rss_kib(self) -> int:
        """Resident memory of zurl, the runner and every process under it."""
        return sum(_rss_kib(pid) for proc in self.procs for pid in _tree(proc.pid))

    async def publish(self, channels: list[str]) -> None:
        """An item per channel, stamped just before the first request is sent; in requests
        of PUBLISH_BATCH items sent at once (Pushpin refuses a body over 1 MB)."""
        stamp = f"bench:{time.monotonic_ns()}"
        data = orjson.dumps({"title": stamp, "body": BODY}).decode()
        content = f"event: notification\ndata: {data}\n\n"
        item = {"formats": {"http-stream": {"content": content}}}
        batches = [channels[i : i + PUBLISH_BATCH] for i in range(0, len(channels), PUBLISH_BATCH)]
        bodies = [orjson.dumps({"items": [{"channel": c, **item} for c in b]}) for b in batches]
        limits = httpx.Limits(max_connections=len(bodies))
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            answers = await asyncio.gather(
                *(client.post(self.publish_url, content=body) for body in bodies)
            )
        for answer in answers:
            answer.raise_for_status()


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def _tree(root: int) -> list[int]:
    """`root` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _rss_kib(pid: int) -> int:
    """0 for a process that ended since the tree was read."""
    try:
        return rss_kib(pid)
    except OSError:
        return 0


async def _pushpin_broadcast(
    pushpin: Pushpin, size: int, per_user: bool
) -> tuple[dict[str, float], float]:
    """Latency spread of one publish to `size` Pushpin streams, and RSS KiB per stream."""
    names = [f"u{i}" for i in range(size)] if per_user else ["all"] * size
    path = "/stream/{token}"
    before = pushpin.rss_kib()
    async with StreamFleet.open_at("127.0.0.1", pushpin.http_port, path, names) as fleet:
        await asyncio.sleep(1.0)
        grown = pushpin.rss_kib() - before
        await pushpin.publish(sorted(set(names)))
        latencies = await fleet.collect(size, timeout_s=COLLECT_TIMEOUT_S)
    return {**_spread(latencies, size), "received": float(len(latencies))}, grown / size


async def _hub_broadcast(hub: BenchHub, size: int) -> tuple[dict[str, float], float, float]:
    """As bench/streams.py's broadcast, on a freshly restarted hub: spread, RSS KiB per
    stream, and the POST's own seconds."""
    await hub.restart()
    name = f"pp{uuid.uuid4().hex[:6]}{size}"
    await make_group(hub, name, size)
    client = RawClient(hub.base_url)
    await client.connect()
    try:
        before = hub.rss_kib()
        async with StreamFleet.open(hub, member_names(name, size)) as fleet:
            await asyncio.sleep(1.0)
            grown = hub.rss_kib() - before
            started = time.perf_counter()
            status = await _post(client, hub, {"groups": [name]})
            post_s = time.perf_counter() - started
            latencies = []
            if status == 202:
                latencies = await fleet.collect(size, timeout_s=COLLECT_TIMEOUT_S)
    finally:
        client.close()
    return {**_spread(latencies, size), "received": float(len(latencies))}, grown / size, post_s


def versus_pushpin(size: int) -> Callable[[BenchHub], Awaitable[Measured]]:
    """Pushpin (one channel; a channel per user) and the hub, `size` streams, one run."""

    async def scenario(hub: BenchHub) -> Measured:
        if not INSTALLED:
            raise Skipped("pushpin is not installed (Debian: apt-get install pushpin)")
        async with GripOrigin().serving() as origin, Pushpin.run(origin.port) as pushpin:
            one, pushpin_kib = await _pushpin_broadcast(pushpin, size, per_user=False)
            each, _ = await _pushpin_broadcast(pushpin, size, per_user=True)
        ours, hub_kib, post_s = await _hub_broadcast(hub, size)
        metrics = {
            "streams": float(size),
            "hub p99 ms": ours["p99 ms"],
            "pushpin 1-channel p99 ms": one["p99 ms"],
            "pushpin per-user p99 ms": each["p99 ms"],
            "hub / pushpin 1-channel p99": _ratio(ours["p99 ms"], one["p99 ms"]),
            "hub / pushpin per-user p99": _ratio(ours["p99 ms"], each["p99 ms"]),
            "hub p50 ms": ours["p50 ms"],
            "pushpin 1-channel p50 ms": one["p50 ms"],
            "hub max ms": ours["max ms"],
            "pushpin 1-channel max ms": one["max ms"],
            "hub POST seconds": post_s,
            "hub received": ours["received"],
            "pushpin 1-channel received": one["received"],
            "pushpin per-user received": each["received"],
            "hub KiB per stream": hub_kib,
            "pushpin KiB per stream": pushpin_kib,
            "RSS hub / pushpin": _ratio(hub_kib, pushpin_kib),
        }
        return Measured(metrics)

    return scenario


def _ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs and math.isfinite(theirs) else math.nan


scenarios.ALL += [
    (f"pushpin vs hub: broadcast to {n // 1000}k streams", versus_pushpin(n))
    for n in (5000, 10_000)
]
