"""`python -m bench.streamgen`: a load-generator process holding many SSE streams on raw sockets.

It reads one JSON command per line on stdin and answers one JSON line on stdout:

    {"cmd": "open", "host", "port", "src", "tokens": [...], "parallel", "path"?}
        -> opened, failed, retries (streams the hub dropped while opening, reopened), seconds
    {"cmd": "collect", "expect", "timeout_s"}  -> latencies_us of the `notification` events
    {"cmd": "status"}                          -> alive (streams still open)
    {"cmd": "resume", "host", "port", "src", "parallel", "expect", "timeout_s"}
        -> every stream (the hub cut them) reopened with `Last-Event-ID` = the last event
           id it saw: reconnected, failed, first_byte_ns (when each answered), caught_up
           (streams that got `expect` distinct notification events), caught_up_ns (when
           the last of them did), duplicates, extra (notifications beyond `expect`)
    {"cmd": "close"}                           -> closed (then the process exits)

`path` defaults to the hub's `/v1/me/stream`, each token sent as a bearer token; a path
with `{token}` names each stream's token in its URL instead (Pushpin's GRIP origin,
bench/pushpin.py). A stream is ready at its first `counts` event.

A notification's title carries `bench:<CLOCK_MONOTONIC ns at send>`; receipt time minus
that stamp is its latency (one clock for every process on the machine). Parsing is a
bytes search per received chunk: no HTTP or SSE parser.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import resource
import sys
import time
from typing import cast

import orjson
import uvloop

EVENT = b"event: notification"
STAMP = b"bench:"
KEEP = len(EVENT) + 1
ROUNDS = 6


class Recorder:
    """Latencies of every notification event seen since the last `take`."""

    def __init__(self) -> None:
        self.latencies_ns: list[int] = []
        self.arrived = asyncio.Event()
        self.expect = 0

    def record(self, latency_ns: int) -> None:
        self.latencies_ns.append(latency_ns)
        if len(self.latencies_ns) >= self.expect:
            self.arrived.set()

    def take(self) -> list[int]:
        taken, self.latencies_ns = self.latencies_ns, []
        self.arrived.clear()
        return taken


class Stream(asyncio.Protocol):
    """One SSE connection: `ready` once the first `counts` event came; then scans for stamps."""

    def __init__(self, request: bytes, recorder: Recorder) -> None:
        self.request = request
        self.recorder = recorder
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.tail = b""
        self.dead = False
        self.token = ""
        self.last_id = b""
        """The id of the last event seen (a resume's `Last-Event-ID`)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's is no subclass
        self.transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        self.dead = True
        if not self.ready.done():
            self.ready.set_exception(ConnectionError("stream closed before its first event"))

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        buf = self.tail + data if self.tail else data
        if not self.ready.done() and b"event: counts" in buf:
            self.ready.set_result(None)
        if (i := buf.rfind(b"\nid: ")) >= 0 and (j := buf.find(b"\n", i + 5)) >= 0:
            self.last_id = buf[i + 5 : j]
        self.tail = buf[self._scan(buf, now) :]

    def _scan(self, buf: bytes, now: int) -> int:
        """Record every complete stamped event in `buf`; return where the unread tail starts."""
        start = 0
        while (i := buf.find(EVENT, start)) >= 0:
            j = buf.find(STAMP, i)
            end = buf.find(b'"', j) if j >= 0 else -1
            if end < 0:
                return i
            self.recorder.record(now - int(buf[j + len(STAMP) : end]))
            start = end
        return max(start, len(buf) - KEEP)


class Resumed(asyncio.Protocol):
    """A stream reopened after a cut: the distinct notification events it replays, and
    when it has `expect` of them (parsed frame by frame: the storm is about correctness)."""

    def __init__(self, request: bytes, expect: int) -> None:
        self.request = request
        self.expect = expect
        self.buffer = b""
        self.seqs: list[int] = []
        self.first_byte_ns = 0
        self.caught_up_ns = 0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)
        self.transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        self.first_byte_ns = self.first_byte_ns or now
        frames = (self.buffer + data).split(b"\n\n")
        self.buffer = frames.pop()
        for frame in frames:  # a frame may follow a chunk-size line (chunked encoding)
            if (i := frame.find(b"event: notification")) < 0:
                continue
            j = frame.find(b"\nid: ", i)
            self.seqs.append(int(frame[j + 5 : frame.find(b"-", j)]))
        if not self.caught_up_ns and len(set(self.seqs)) >= self.expect:
            self.caught_up_ns = now
            self.done.set_result(None)


class Fleet:
    """Every stream this process holds."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.streams: list[Stream] = []
        self.resumed: list[Resumed] = []

    async def open(self, cmd: dict[str, object]) -> dict[str, object]:
        """Open a stream per token; reopen (up to ROUNDS times) those the hub dropped."""
        host, port, src = str(cmd["host"]), int(cmd["port"]), str(cmd["src"])  # type: ignore[call-overload]
        pending: list[str] = cmd["tokens"]  # type: ignore[assignment]
        gate = asyncio.Semaphore(int(cmd.get("parallel", 32)))  # type: ignore[call-overload]
        path = str(cmd.get("path", "/v1/me/stream"))
        started, retries, error = time.perf_counter(), 0, None
        for round_ in range(ROUNDS):
            if round_:
                retries += len(pending)
                await asyncio.sleep(0.5)
            results = await asyncio.gather(
                *(self._open_one(host, port, src, path, token, gate) for token in pending),
                return_exceptions=True,
            )
            await asyncio.sleep(0.5)  # a stream may still fail right after its first event
            pending, error = self._keep(pending, results, error)
            if not pending:
                break
        gc.freeze()  # the streams live until `close`: no collection scans them again
        return {
            "opened": len(self.streams),
            "failed": len(pending),
            "retries": retries,
            "error": error,
            "seconds": time.perf_counter() - started,
        }

    def _keep(
        self, tokens: list[str], results: list[Stream | BaseException], error: str | None
    ) -> tuple[list[str], str | None]:
        """Keep the live streams; return the tokens to try again and the first error."""
        again = []
        for token, result in zip(tokens, results, strict=True):
            if isinstance(result, BaseException) or result.dead:
                again.append(token)
                error = error or (repr(result) if isinstance(result, BaseException) else "closed")
                if isinstance(result, Stream) and result.transport is not None:
                    result.transport.close()
            else:
                self.streams.append(result)
        return again, error

    async def _open_one(
        self, host: str, port: int, src: str, path: str, token: str, gate: asyncio.Semaphore
    ) -> Stream:
        if "{token}" in path:
            head = f"GET {path.replace('{token}', token)} HTTP/1.1\r\nHost: {host}\r\n"
        else:
            head = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        request = (head + "Accept: text/event-stream\r\n\r\n").encode()
        loop = asyncio.get_running_loop()
        async with gate:
            transport, stream = await loop.create_connection(
                lambda: Stream(request, self.recorder), host, port, local_addr=(src, 0)
            )
            stream.token = token
            try:
                async with asyncio.timeout(60):
                    await stream.ready
            except BaseException:
                transport.close()
                raise
            return stream

    async def resume(self, cmd: dict[str, object]) -> dict[str, object]:
        """Reopen every stream at once with its last event id; wait until each has
        `expect` distinct notifications (or `timeout_s`)."""
        host, port, src = str(cmd["host"]), int(cmd["port"]), str(cmd["src"])  # type: ignore[call-overload]
        expect, gate = int(cmd["expect"]), asyncio.Semaphore(int(cmd["parallel"]))  # type: ignore[call-overload]
        loop = asyncio.get_running_loop()

        async def reopen(stream: Stream) -> Resumed | None:
            head = (
                f"GET /v1/me/stream HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: Bearer {stream.token}\r\n"
                f"Last-Event-ID: {stream.last_id.decode()}\r\nAccept: text/event-stream\r\n\r\n"
            )
            async with gate:
                try:
                    _, resumed = await loop.create_connection(
                        lambda: Resumed(head.encode(), expect), host, port, local_addr=(src, 0)
                    )
                except OSError:
                    return None
            return resumed

        opened = [r for r in await asyncio.gather(*map(reopen, self.streams)) if r is not None]
        self.resumed = opened
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(float(cmd["timeout_s"])):  # type: ignore[arg-type]
                await asyncio.gather(*(r.done for r in opened))
        caught = [r for r in opened if r.caught_up_ns]
        return {
            "reconnected": sum(1 for r in opened if r.first_byte_ns),
            "failed": len(self.streams) - len(opened),
            "first_byte_ns": max((r.first_byte_ns for r in opened), default=0),
            "caught_up": len(caught),
            "caught_up_ns": max((r.caught_up_ns for r in caught), default=0),
            "duplicates": sum(len(r.seqs) - len(set(r.seqs)) for r in opened),
            "extra": sum(max(len(set(r.seqs)) - expect, 0) for r in opened),
        }

    async def collect(self, cmd: dict[str, object]) -> dict[str, object]:
        self.recorder.expect = int(cmd["expect"])  # type: ignore[call-overload]
        self.recorder.arrived.clear()
        if len(self.recorder.latencies_ns) >= self.recorder.expect:
            self.recorder.arrived.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(float(cmd["timeout_s"])):  # type: ignore[arg-type]
                await self.recorder.arrived.wait()
        return {"latencies_us": [ns // 1000 for ns in self.recorder.take()]}

    def close(self) -> dict[str, object]:
        for stream in [*self.streams, *self.resumed]:
            if stream.transport is not None:
                stream.transport.close()
        return {"closed": len(self.streams)}


def raise_fd_limit() -> int:
    """Soft fd limit up to the hard one (the most an unprivileged process may hold)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


async def serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**28)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    fleet = Fleet()
    while line := await reader.readline():
        cmd = orjson.loads(line)
        if cmd["cmd"] == "open":
            answer = await fleet.open(cmd)
        elif cmd["cmd"] == "collect":
            answer = await fleet.collect(cmd)
        elif cmd["cmd"] == "resume":
            answer = await fleet.resume(cmd)
        elif cmd["cmd"] == "status":
            answer = {"alive": sum(not stream.dead for stream in fleet.streams)}
        else:
            answer = fleet.close()
        sys.stdout.buffer.write(orjson.dumps(answer) + b"\n")
        sys.stdout.buffer.flush()
        if cmd["cmd"] == "close":
            await asyncio.sleep(0.5)  # let the FINs go out
            return


def main() -> None:
    raise_fd_limit()
    uvloop.run(serve())


if __name__ == "__main__":
    main()
