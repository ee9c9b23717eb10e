"""Durable inbox mode's log: notifications and their recipients, users' logged inbox
operations, and what a rebuild reads back. Flush only: the caller owns the transaction.

The bulk inserts go through asyncpg with `unnest` (one statement per batch, whatever its
size); SQLAlchemy's executemany took longer than the commit for big fan-outs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db import driver
from notifyhub.db.models import InboxChange, InboxNotification, InboxRecipient

NotificationRow = tuple[str, bytes, bool, datetime]
"""(id, content JSON, pull, expires_at)."""
RecipientRow = tuple[str, str, str]
"""(notification id, tenant, user)."""
OperationRow = tuple[str, str, str]
"""(tenant, user, operation JSON)."""

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
_INSERT_OPERATIONS = """
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
_PRUNE_OPERATIONS = """
DELETE FROM inbox_changes WHERE id IN (
    SELECT id FROM inbox_changes WHERE at < now() - make_interval(secs => $1) LIMIT $2)
"""


def _columns(rows: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    return [list(column) for column in zip(*rows, strict=True)]


async def add_notifications(
    session: AsyncSession,
    notifications: Sequence[NotificationRow],
    recipients: Sequence[RecipientRow],
) -> None:
    """Log notifications and their recipients (a retry's duplicates are skipped)."""
    raw = await driver.of_session(session)
    if notifications:
        await raw.execute(_INSERT_NOTIFICATIONS, *_columns(notifications))
    if recipients:
        await raw.execute(_INSERT_RECIPIENTS, *_columns(recipients))


async def append_operations(session: AsyncSession, operations: Sequence[OperationRow]) -> None:
    """Append users' inbox operations, in the given order (ids follow it)."""
    if operations:
        await (await driver.of_session(session)).execute(_INSERT_OPERATIONS, *_columns(operations))


def _deleted(status: str) -> int:
    """asyncpg's command tag `DELETE n` -> n."""
    return int(status.rsplit(" ", 1)[-1])


async def prune(session: AsyncSession, *, older_than_s: float, batch: int) -> int:
    """Delete up to `batch` expired notifications (with their recipients) and up to `batch`
    operations older than `older_than_s`; returns the notifications and operations gone."""
    raw = await driver.of_session(session)
    await raw.execute(_PRUNE_RECIPIENTS, batch)
    notifications = await raw.execute(_PRUNE_NOTIFICATIONS, batch)
    operations = await raw.execute(_PRUNE_OPERATIONS, older_than_s, batch)
    return _deleted(notifications) + _deleted(operations)


async def unexpired_notifications(
    session: AsyncSession, batch: int
) -> AsyncIterator[Sequence[InboxNotification]]:
    """Every notification not yet expired, in id order, `batch` rows at a time."""
    query = (
        select(InboxNotification)
        .where(InboxNotification.expires_at > datetime.now(UTC))
        .order_by(InboxNotification.id)
        .execution_options(yield_per=batch)
    )
    rows = await session.stream_scalars(query)
    async for part in rows.partitions(batch):
        yield part


async def recipients_of(
    session: AsyncSession, ids: Sequence[str]
) -> dict[str, list[tuple[str, str]]]:
    """The logged (tenant, user) recipients of each notification id."""
    found: dict[str, list[tuple[str, str]]] = {}
    query = select(InboxRecipient).where(InboxRecipient.notification_id.in_(ids))
    for r in await session.scalars(query):
        found.setdefault(r.notification_id, []).append((r.tenant, r.user_id))
    return found


async def operations(session: AsyncSession, batch: int) -> AsyncIterator[InboxChange]:
    """Every logged operation, in the order it was logged."""
    query = select(InboxChange).order_by(InboxChange.id).execution_options(yield_per=batch)
    async for row in await session.stream_scalars(query):
        yield row
