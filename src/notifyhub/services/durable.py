"""Durable inbox mode: notifications in PostgreSQL before the 202, and inbox rebuilds.

`NOTIFYHUB_INBOX_DURABILITY=postgres`. Every accepted notification and its recipients are
committed before the 202 (group commit: one transaction in flight, whatever arrives
meanwhile shares the next). Users' logged inbox operations (store/operations.py: mark,
remove, read-all, recall) are buffered and appended every flush interval, so a Redis loss
costs at most that window of state changes and no notification. A rebuild replays both
through the normal inbox writes: notifications in id order (skipping expired ones), then
operations in order, each through its `LoggedOp.replay`; one this code does not know
stops the rebuild (`UnknownOperation`) instead of being skipped. SQL lives in
db/repositories/inbox_log.py; this service owns the transactions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from notifyhub.db.repositories import inbox_log
from notifyhub.db.unit import Units
from notifyhub.domain.notification import Notification
from notifyhub.store.inbox import InboxStore, UserRef, arrival_ms
from notifyhub.store.operations import LoggedOp, decode_logged

log = logging.getLogger(__name__)

REBUILD_BATCH = 500
PRUNE_BATCH = 10_000

_Pending = tuple[Notification, Sequence[UserRef], bool, "asyncio.Future[None]"]


class DurableInbox:
    """The notification log (group-committed) and the buffered state-change log. Each
    group commit and flush is a unit of its own: one batch answers many requests."""

    def __init__(self, units: Units, store: InboxStore) -> None:
        self._units = units
        self._store = store
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._changes: list[tuple[str, str, str]] = []
        self.commits = 0
        """Transactions written by `write` (fewer than calls under concurrency)."""

    async def write(
        self, notification: Notification, users: Sequence[UserRef], *, pull: bool
    ) -> None:
        """Return once the notification and its recipients are committed."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((notification, users, pull, done))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._commit_pending())
        await asyncio.shield(done)

    async def _commit_pending(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await self._commit(batch)
            except Exception as exc:
                _resolve(batch, exc)
            else:
                _resolve(batch, None)

    async def _commit(self, batch: list[_Pending]) -> None:
        rows = [
            (n.id, orjson.dumps(n.model_dump(mode="json")), pull, n.expires_at)
            for n, _users, pull, _done in batch
        ]
        recipients = [(n.id, t, u) for n, users, _pull, _done in batch for t, u in users]
        async with self._units() as unit:
            session = unit.session
            await inbox_log.add_notifications(session, rows, recipients)
        self.commits += 1

    def changed(self, tenant: str, user: str, op: LoggedOp) -> None:
        """Buffer one inbox operation; `flush_changes` appends the buffer in order."""
        self._changes.append((tenant, user, orjson.dumps(op.to_json()).decode()))

    async def flush_changes(self) -> int:
        batch, self._changes = self._changes, []
        if not batch:
            return 0
        try:
            async with self._units() as unit:
                session = unit.session
                await inbox_log.append_operations(session, batch)
        except Exception:
            self._changes[:0] = batch  # keep them, in order, for the next flush
            raise
        return len(batch)

    async def prune(self, max_ttl_s: int) -> int:
        """Drop expired notifications (a rebuild skips them anyway) and changes older than
        any notification can live; one bounded batch per call."""
        async with self._units() as unit:
            session = unit.session
            return await inbox_log.prune(session, older_than_s=float(max_ttl_s), batch=PRUNE_BATCH)

    async def rebuild(self) -> tuple[int, int]:
        """Replay every unexpired notification, then every state change, into Redis.

        Idempotent: a copy a user already holds is skipped, changes re-apply to the same
        state. Returns (notifications, changes) replayed."""
        await self.flush_changes()
        notifications = await self._replay_notifications()
        changes = await self._replay_changes()
        log.info("rebuilt inboxes: %d notifications, %d state changes", notifications, changes)
        return notifications, changes

    async def _replay_notifications(self) -> int:
        replayed = 0
        async with self._units() as unit, self._units() as lookup:
            async for batch in inbox_log.unexpired_notifications(unit.session, REBUILD_BATCH):
                users = await inbox_log.recipients_of(lookup.session, [row.id for row in batch])
                for row in batch:
                    notification = Notification.model_validate_json(row.content)
                    reached = users.get(row.id, [])
                    # a scheduled one's copies sort by its delivery, as when first placed
                    arrived = arrival_ms(notification)
                    await self._store.place(
                        notification, reached, pull=row.pull, arrived_ms=arrived
                    )
                replayed += len(batch)
        return replayed

    async def _replay_changes(self) -> int:
        replayed = 0
        async with self._units() as unit:
            session = unit.session
            async for row in inbox_log.operations(session, REBUILD_BATCH):
                await apply_change(self._store, row.tenant, row.user_id, row.op)
                replayed += 1
        return replayed


def _resolve(batch: list[_Pending], error: Exception | None) -> None:
    for _n, _users, _pull, done in batch:
        if done.done():
            continue
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)


async def apply_change(store: InboxStore, tenant: str, user: str, op: Mapping[str, Any]) -> None:
    """Re-apply one logged inbox operation through the normal inbox writes; one of a kind
    this code does not know raises (store/operations.py `LoggedOpError`)."""
    await decode_logged(op).replay(store, tenant, user)
