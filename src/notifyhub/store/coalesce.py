"""Requests made in one event-loop tick, served together by one call.

A broadcast wakes thousands of streams at once, and a reconnect storm opens thousands:
each stream reads its own change log and asks its own user's rate-limit bucket. Made one
by one, each request is a round trip of its own (redis-py's cost per command, a pooled
connection each); coalesced, every request of a tick rides one pipeline:

    N callers ──► pending ──► call_soon: one flush per tick
                                   │
                                   ▼
                  serve(<= max_batch requests) per task ──► N results

With `max_in_flight`, requests made while that many batches are in flight wait for one
of them to come back and go together in the next: a stream of requests that each come
alone in their tick (streams opening one by one during a storm) then rides pipelines
too, at the cost of waiting out at most one batch already sent.

A caller that leaves (cancelled) is dropped from its batch if the batch has not been
sent yet, and never disturbs the others; an error of the batch reaches every caller in it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Q = TypeVar("Q")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class _Pending(Generic[Q, R]):
    request: Q
    future: asyncio.Future[R]


class Coalescer(Generic[Q, R]):
    """`await coalescer(request)`: its result from `serve`, which gets every request of
    the tick (at most `max_batch` per call) and answers them in order; owns its tasks.
    `max_in_flight` (None: unbounded) holds new requests while that many calls are out."""

    def __init__(
        self,
        serve: Callable[[list[Q]], Awaitable[Sequence[R]]],
        *,
        max_batch: int = 500,
        max_in_flight: int | None = None,
    ) -> None:
        self._serve = serve
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._pending: list[_Pending[Q, R]] = []
        self._flush_armed = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, request: Q) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append(_Pending(request, future))
        self._arm(loop)
        return await future

    def _full(self) -> bool:
        return self._max_in_flight is not None and len(self._tasks) >= self._max_in_flight

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """Flush at the end of this tick, unless one is due already or every slot is taken
        (the batch coming back flushes then)."""
        if self._pending and not self._flush_armed and not self._full():
            self._flush_armed = True
            loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_armed = False
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), self._max_batch):
            if self._full():
                self._pending = pending[start:]  # sent when a batch comes back
                return
            task = asyncio.create_task(self._run(pending[start : start + self._max_batch]))
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._arm(task.get_loop())

    async def _run(self, batch: list[_Pending[Q, R]]) -> None:
        live = [p for p in batch if not p.future.done()]  # a caller may have left
        if not live:
            return
        try:
            results = await self._serve([p.request for p in live])
        except asyncio.CancelledError:
            for p in live:
                p.future.cancel()
            raise
        except Exception as exc:  # e.g. Redis down: every waiting caller sees the error
            for p in live:
                if not p.future.done():
                    p.future.set_exception(exc)
            return
        for p, result in zip(live, results, strict=True):
            if not p.future.done():
                p.future.set_result(result)

    async def aclose(self) -> None:
        """Cancel the batches in flight (their callers are ending too) and wait for them."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
