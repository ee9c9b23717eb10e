"""Inbox views: a (tenant, owner)'s named filters ('' owner: the tenant's), and the
version of each set, bumped in the same transaction as every change of it."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import InboxView, InboxViewVersion
from notifyhub.domain.views import Scope, View, ViewFilter, ViewSet

TENANT = ""
"""The owner of a tenant's views."""


async def lock(session: AsyncSession, tenant: str, owner: str) -> None:
    """Changes of one set take turns (transaction-scoped), so the count limit holds and
    versions follow commit order."""
    key = func.hashtextextended(f"views:{tenant}:{owner}", 0)
    await session.execute(select(func.pg_advisory_xact_lock(key)))


def _view(row: InboxView) -> View:
    scope: Scope = "tenant" if row.owner == TENANT else "personal"
    return View(row.name, ViewFilter.from_json(row.filter), scope, row.label, row.updated_at)


async def view_set(session: AsyncSession, tenant: str, owner: str) -> ViewSet:
    """The set's views by name, and its version (0: it never had any)."""
    version = await session.scalar(
        select(InboxViewVersion.version).where(
            InboxViewVersion.tenant == tenant, InboxViewVersion.owner == owner
        )
    )
    rows = await session.scalars(
        select(InboxView)
        .where(InboxView.tenant == tenant, InboxView.owner == owner)
        .order_by(InboxView.name)
    )
    return ViewSet(version or 0, tuple(_view(row) for row in rows))


async def put(session: AsyncSession, tenant: str, owner: str, view: View) -> bool:
    """Create or replace one view; True when it is new. The caller holds `lock`."""
    existed = await session.scalar(
        select(InboxView.id).where(
            InboxView.tenant == tenant, InboxView.owner == owner, InboxView.name == view.name
        )
    )
    row = {
        "tenant": tenant,
        "owner": owner,
        "name": view.name,
        "label": view.label,
        "filter": view.filter.to_json(),
        "updated_at": view.updated_at or datetime.now(UTC),
    }
    statement = insert(InboxView).values(row)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[InboxView.tenant, InboxView.owner, InboxView.name],
            set_={
                "label": statement.excluded.label,
                "filter": statement.excluded.filter,
                "updated_at": statement.excluded.updated_at,
            },
        )
    )
    await _bump(session, tenant, owner)
    return existed is None


async def remove(session: AsyncSession, tenant: str, owner: str, name: str) -> bool:
    """Delete one view; False when there was none. The caller holds `lock`."""
    gone = await session.scalar(
        delete(InboxView)
        .where(InboxView.tenant == tenant, InboxView.owner == owner, InboxView.name == name)
        .returning(InboxView.id)
    )
    if gone is None:
        return False
    await _bump(session, tenant, owner)
    return True


async def _bump(session: AsyncSession, tenant: str, owner: str) -> None:
    statement = insert(InboxViewVersion).values(tenant=tenant, owner=owner, version=1)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[InboxViewVersion.tenant, InboxViewVersion.owner],
            set_={"version": InboxViewVersion.version + 1},
        )
    )
