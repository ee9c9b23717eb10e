"""uvicorn's server, taught to end SSE streams first so a shutdown never waits on them."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from notifyhub.process.gc import CollectorPolicy

if TYPE_CHECKING:
    from notifyhub.api.fastpath import HubApp


class HubServer(uvicorn.Server):
    """On SIGINT/SIGTERM (or `handle_exit`), close every stream, then stop as uvicorn does."""

    def __init__(
        self,
        config: uvicorn.Config,
        app: HubApp,
        collector: CollectorPolicy | None = None,
        *,
        on_started: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._app = app
        self._loop: asyncio.AbstractEventLoop | None = None
        self._collector = collector
        """The garbage collector policy this server installs and runs the thaws of (or None)."""
        self._on_started = on_started
        """Called once the app has started and the socket listens (the dev credentials)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self._on_started is not None and not self.should_exit:
            self._on_started()

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        thaws = None
        if self._collector is not None:
            self._collector.install()
            thaws = asyncio.create_task(self._collector.thaw_every(), name="notifyhub-gc-thaw")
        try:
            await super().serve(sockets)
        finally:
            if thaws is not None:
                thaws.cancel()

    def _end_streams(self) -> None:
        state = self._app.running
        if state is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(state["hub"].begin_shutdown)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._end_streams()
        super().handle_exit(sig, frame)

    def stop(self) -> None:
        """Shut down from inside the program (tests), without raising a signal."""
        self._end_streams()
        self.should_exit = True


@contextmanager
def exit_on_signals() -> Iterator[None]:
    """Inside: the first SIGTERM or SIGINT raises `SystemExit(0)`, later ones are ignored.

    uvicorn handles both signals while it serves and, once it has shut down, raises the
    one it caught again. Under the default SIGTERM action the process would die right
    there, before any `finally` or exit callback runs (the embedded stores' stop: they
    were left running). Ignoring the second one keeps that clean-up from being cut short.
    """
    leaving = False

    def leave(signum: int, frame: FrameType | None) -> None:
        nonlocal leaving
        if not leaving:
            leaving = True
            raise SystemExit(0)

    previous = {s: signal.signal(s, leave) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
