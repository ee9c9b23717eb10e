"""Coalesces the change-log reads of every stream woken in one event-loop tick into
pipelined Redis round trips.

A broadcast rings thousands of local streams at once. Read one by one, each would take
its own round trip and its own pooled connection (the pool grows to match); read
here, they become `ceil(n / max_batch)` pipelines on as many connections:

    ring(seq) x N ──► N streams call changes() ──► pending reads
                                                     │ call_soon: one flush per tick
                                                     ▼
                                   InboxStore.changes_many(<= max_batch reads)
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from notifyhub.store.changes import Changes
from notifyhub.store.inbox import ChangeRead, InboxStore


@dataclass(frozen=True, slots=True)
class _Pending:
    read: ChangeRead
    future: asyncio.Future[Changes]


class ChangeReader:
    """`changes()` for streams, batched per tick; owns its flush tasks."""

    def __init__(self, store: InboxStore, *, max_batch: int = 500) -> None:
        self._store = store
        self._max_batch = max_batch
        self._pending: list[_Pending] = []
        self._flush_scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def changes(self, tenant: str, user: str, after_seq: int, max_entries: int) -> Changes:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Changes] = loop.create_future()
        self._pending.append(_Pending(ChangeRead(tenant, user, after_seq, max_entries), future))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._flush_scheduled = False
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), self._max_batch):
            task = asyncio.create_task(self._read(pending[start : start + self._max_batch]))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _read(self, batch: list[_Pending]) -> None:
        live = [p for p in batch if not p.future.done()]  # a stream may have left
        if not live:
            return
        try:
            results = await self._store.changes_many([p.read for p in live])
        except asyncio.CancelledError:
            for p in live:
                p.future.cancel()
            raise
        except Exception as exc:  # Redis down: every waiting stream sees the error
            for p in live:
                if not p.future.done():
                    p.future.set_exception(exc)
            return
        for p, result in zip(live, results, strict=True):
            if not p.future.done():
                p.future.set_result(result)

    async def aclose(self) -> None:
        """Cancel reads in flight (their streams are ending too) and wait for them."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
