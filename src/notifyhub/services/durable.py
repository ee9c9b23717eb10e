"""Durable inbox mode: notifications in PostgreSQL before the 202, and inbox rebuilds.

`NOTIFYHUB_INBOX_DURABILITY=postgres`. Every accepted notification and its recipients are
committed before the 202 (group commit: one transaction in flight, whatever arrives
meanwhile shares the next). Users' state changes (mark, remove, read-all) and recalls are
buffered and appended every flush interval, so a Redis loss costs at most that window of
state changes and no notification. A rebuild replays both through the normal inbox
writes: notifications in id order (skipping expired ones), then changes in order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import InboxChange, InboxNotification, InboxRecipient
from notifyhub.domain.notification import Notification
from notifyhub.store.inbox import InboxStore, UserRef

log = logging.getLogger(__name__)

REBUILD_BATCH = 500
_INSERT_NOTIFICATIONS = """
INSERT INTO inbox_notifications (id, content, pull, expires_at)
SELECT * FROM unnest($1::text[], $2::bytea[], $3::bool[], $4::timestamptz[])
ON CONFLICT DO NOTHING
"""
_INSERT_RECIPIENTS = """
INSERT INTO inbox_recipients (notification_id, tenant, user_id)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT DO NOTHING
"""
_INSERT_CHANGES = """
INSERT INTO inbox_changes (tenant, user_id, op)
SELECT t, u, o::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY
    AS x(t, u, o, n)
ORDER BY n
"""

_PRUNE_RECIPIENTS = """
DELETE FROM inbox_recipients WHERE notification_id IN (
    SELECT id FROM inbox_notifications WHERE expires_at < now() ORDER BY id LIMIT $1)
"""
_PRUNE_NOTIFICATIONS = """
DELETE FROM inbox_notifications WHERE id IN (
    SELECT id FROM inbox_notifications WHERE expires_at < now() ORDER BY id LIMIT $1)
"""
_PRUNE_CHANGES = """
DELETE FROM inbox_changes WHERE id IN (
    SELECT id FROM inbox_changes WHERE at < now() - make_interval(secs => $1) LIMIT $2)
"""
PRUNE_BATCH = 10_000

_Pending = tuple[Notification, Sequence[UserRef], bool, "asyncio.Future[None]"]


async def _raw(session: AsyncSession) -> Any:
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    return raw.driver_connection


class DurableInbox:
    """The notification log (group-committed) and the buffered state-change log."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], store: InboxStore) -> None:
        self._sessionmaker = sessionmaker
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
                _settle(batch, exc)
            else:
                _settle(batch, None)

    async def _commit(self, batch: list[_Pending]) -> None:
        rows = [
            (n.id, orjson.dumps(n.model_dump(mode="json")), pull, n.expires_at)
            for n, _users, pull, _done in batch
        ]
        recipients = [(n.id, t, u) for n, users, _pull, _done in batch for t, u in users]
        async with self._sessionmaker.begin() as session:
            raw = await _raw(session)
            await raw.execute(_INSERT_NOTIFICATIONS, *map(list, zip(*rows, strict=True)))
            if recipients:
                await raw.execute(_INSERT_RECIPIENTS, *map(list, zip(*recipients, strict=True)))
        self.commits += 1

    def changed(self, tenant: str, user: str, op: dict[str, Any]) -> None:
        """Buffer one state change; `flush_changes` appends the buffer in order."""
        self._changes.append((tenant, user, orjson.dumps(op).decode()))

    async def flush_changes(self) -> int:
        batch, self._changes = self._changes, []
        if not batch:
            return 0
        try:
            async with self._sessionmaker.begin() as session:
                raw = await _raw(session)
                await raw.execute(_INSERT_CHANGES, *map(list, zip(*batch, strict=True)))
        except Exception:
            self._changes[:0] = batch  # keep them, in order, for the next flush
            raise
        return len(batch)

    async def prune(self, max_ttl_s: int) -> int:
        """Drop expired notifications (a rebuild skips them anyway) and changes older than
        any notification can live; one bounded batch per call."""
        async with self._sessionmaker.begin() as session:
            raw = await _raw(session)
            await raw.execute(_PRUNE_RECIPIENTS, PRUNE_BATCH)
            notifications = await raw.execute(_PRUNE_NOTIFICATIONS, PRUNE_BATCH)
            changes = await raw.execute(_PRUNE_CHANGES, float(max_ttl_s), PRUNE_BATCH)
        return _deleted(notifications) + _deleted(changes)

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
        query = (
            select(InboxNotification)
            .where(InboxNotification.expires_at > datetime.now(UTC))
            .order_by(InboxNotification.id)
            .execution_options(yield_per=REBUILD_BATCH)
        )
        replayed = 0
        async with self._sessionmaker() as session, self._sessionmaker() as lookup:
            rows = await session.stream_scalars(query)
            async for batch in rows.partitions(REBUILD_BATCH):
                users = await _recipients(lookup, [row.id for row in batch])
                for row in batch:
                    notification = Notification.model_validate_json(row.content)
                    await self._store.deliver(notification, users.get(row.id, []), pull=row.pull)
                replayed += len(batch)
        return replayed

    async def _replay_changes(self) -> int:
        query = select(InboxChange).order_by(InboxChange.id)
        replayed = 0
        async with self._sessionmaker() as session:
            rows = await session.stream_scalars(query.execution_options(yield_per=REBUILD_BATCH))
            async for change in rows:
                await apply_change(self._store, change.tenant, change.user_id, change.op)
                replayed += 1
        return replayed


def _deleted(status: str) -> int:
    """asyncpg's command tag `DELETE n` -> n."""
    return int(status.rsplit(" ", 1)[-1])


def _settle(batch: list[_Pending], error: Exception | None) -> None:
    for _n, _users, _pull, done in batch:
        if done.done():
            continue
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)


async def _recipients(session: AsyncSession, ids: list[str]) -> dict[str, list[UserRef]]:
    found: dict[str, list[UserRef]] = {}
    query = select(InboxRecipient).where(InboxRecipient.notification_id.in_(ids))
    for r in await session.scalars(query):
        found.setdefault(r.notification_id, []).append((r.tenant, r.user_id))
    return found


async def apply_change(store: InboxStore, tenant: str, user: str, op: dict[str, Any]) -> None:
    """Re-apply one logged state change through the normal inbox writes."""
    kind = op["kind"]
    if kind == "mark":
        await store.mark(tenant, user, op["ids"], read=op["read"], seen=op["seen"])
    elif kind == "remove":
        await store.remove(tenant, user, op["ids"])
    elif kind == "mark_all":
        await store.mark_all(tenant, user, category=op["category"], before_id=op["before_id"])
    elif kind == "recall":
        for holder_tenant, holder in await store.recipients(op["id"]):
            if holder_tenant == tenant:
                await store.remove(holder_tenant, holder, [op["id"]])
        await store.forget(op["id"])
