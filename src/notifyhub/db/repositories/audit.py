"""Audit log rows: appended, then read newest first a page at a time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import AuditEntry


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which entries to read; None matches everything."""

    tenant: str | None = None
    key_name: str | None = None
    route: str | None = None
    since: datetime | None = None
    until: datetime | None = None


async def add(session: AsyncSession, entry: AuditEntry) -> None:
    session.add(entry)
    await session.flush()


async def page(
    session: AsyncSession, where: AuditFilter, before_id: int | None, limit: int
) -> list[AuditEntry]:
    """Up to `limit` entries matching `where`, newest first, older than `before_id`."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if before_id is not None:
        query = query.where(AuditEntry.id < before_id)
    if where.tenant is not None:
        query = query.where(AuditEntry.tenant == where.tenant)
    if where.key_name is not None:
        query = query.where(AuditEntry.key_name == where.key_name)
    if where.route is not None:
        query = query.where(AuditEntry.route == where.route)
    if where.since is not None:
        query = query.where(AuditEntry.at >= where.since)
    if where.until is not None:
        query = query.where(AuditEntry.at < where.until)
    return list(await session.scalars(query))
