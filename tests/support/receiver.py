"""Real local webhook receivers (HTTP/1.1 keep-alive on 127.0.0.1:0) and an SMTP sink."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 200
    """The status it was answered with."""


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay_s: float = 0.0
    before: Callable[[Received], Awaitable[object]] | None = None
    """Awaited with the request before it is answered: a receiver that calls back into
    the hub from its handler (say, to confirm the delivery it is holding)."""


class Receiver:
    """Records every request; answers each path from its planned replies, then 200."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._plans: dict[str, deque[Reply]] = defaultdict(deque)
        self._defaults: dict[str, Reply] = {}
        self._server: asyncio.Server | None = None
        self._arrived = asyncio.Condition()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> Receiver:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def plan(self, path: str, *replies: Reply, default: Reply | None = None) -> None:
        self._plans[path].extend(replies)
        if default is not None:
            self._defaults[path] = default

    def at(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    async def wait_for(self, path: str, count: int, timeout_s: float = 15.0) -> list[Received]:
        async with asyncio.timeout(timeout_s), self._arrived:
            await self._arrived.wait_for(lambda: len(self.at(path)) >= count)
        return self.at(path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        line = await reader.readline()
        if not line:
            return False
        path = line.split()[1].decode()
        headers: dict[str, str] = {}
        while (raw := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = raw.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        plan = self._plans[path]
        reply = plan.popleft() if plan else self._defaults.get(path, Reply())
        received = Received(path, headers, body, reply.status)
        async with self._arrived:
            self.received.append(received)
            self._arrived.notify_all()
        if reply.before is not None:
            await reply.before(received)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        head = f"HTTP/1.1 {reply.status} X\r\nContent-Length: {len(reply.body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items()) + "\r\n"
        writer.write(head.encode() + reply.body)
        await writer.drain()
        return True


@contextlib.asynccontextmanager
async def receiver() -> Any:
    r = await Receiver().start()
    try:
        yield r
    finally:
        await r.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
