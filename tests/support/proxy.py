"""A TCP proxy in front of a hub (or a store) whose connections a test can cut: a real
dropped connection (the client sees the socket close mid-stream), not a mock; freeze:
connections stay open and nothing passes either way, as with a hung peer; or slow down:
every chunk held `delay_s` before it passes, as over a slow link."""

from __future__ import annotations

import asyncio
import contextlib


class CuttableProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.heads: list[bytes] = []
        """The request head of every connection forwarded, in order."""
        self.refused = 0
        self._refusing = False
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self.delay_s = 0.0
        """How long each chunk waits before it passes (either way); 0: at once."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def cut(self, *, hold: bool = True) -> None:
        """Drop every open connection; with `hold`, also drop new ones until `resume`."""
        self._refusing = hold
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    def resume(self) -> None:
        self._refusing = False

    def freeze(self) -> None:
        """Hold every byte, either way, until `thaw`: connections (new ones too) open and
        stay open, and nothing is answered, as from a SIGSTOPped server."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Pass on what was held, and everything after."""
        self._flowing.set()

    async def close(self) -> None:
        self.cut()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            self.refused += 1
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._open |= {writer, up_writer}
        upstream = asyncio.create_task(self._pump(reader, up_writer, record=True))
        downstream = asyncio.create_task(self._pump(up_reader, writer, record=False))
        self._tasks |= {upstream, downstream}
        await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
        for task in (upstream, downstream):
            task.cancel()
        for w in (writer, up_writer):
            w.transport.abort()
            self._open.discard(w)
        self._tasks -= {upstream, downstream}

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, record: bool
    ) -> None:
        head = b""
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while chunk := await reader.read(65536):
                await self._flowing.wait()
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                if record and b"\r\n\r\n" not in head:
                    head += chunk
                    if b"\r\n\r\n" in head:
                        self.heads.append(head.split(b"\r\n\r\n", 1)[0])
                writer.write(chunk)
                await writer.drain()
