"""Coalesces the change-log reads of every stream woken in one event-loop tick into
pipelined Redis round trips.

A broadcast rings thousands of local streams at once. Read one by one, each would take
its own round trip and its own pooled connection (the pool grows to match); read
here, they become `ceil(n / max_batch)` pipelines on as many connections:

    ring(seq) x N ──► N streams call changes() ──► pending reads
                                                     │ call_soon: one flush per tick
                                                     ▼
                                   InboxStore.changes_many(<= max_batch reads)

(store/coalesce.py does the batching; the rate limiter batches its asks the same way.)
"""

from __future__ import annotations

from notifyhub.store.changes import Changes
from notifyhub.store.coalesce import Coalescer
from notifyhub.store.inbox import ChangeRead, InboxStore


class ChangeReader:
    """`changes()` for streams, batched per tick; owns its flush tasks."""

    def __init__(self, store: InboxStore, *, max_batch: int = 500) -> None:
        self._reads: Coalescer[ChangeRead, Changes] = Coalescer(
            store.changes_many, max_batch=max_batch
        )

    async def changes(self, tenant: str, user: str, after_seq: int, max_entries: int) -> Changes:
        return await self._reads(ChangeRead(tenant, user, after_seq, max_entries))

    async def aclose(self) -> None:
        """Cancel reads in flight (their streams are ending too) and wait for them."""
        await self._reads.aclose()
