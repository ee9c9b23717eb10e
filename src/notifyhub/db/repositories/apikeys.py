"""API key rows."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import ApiKey


async def add(session: AsyncSession, key: ApiKey) -> None:
    """Insert a key; `IntegrityError` when its tenant (or the hub-wide keys) has one of
    that name (the caller's savepoint keeps its transaction usable)."""
    session.add(key)
    await session.flush()


async def by_prefix(session: AsyncSession, prefix: str) -> ApiKey | None:
    return await session.scalar(select(ApiKey).where(ApiKey.key_prefix == prefix))


async def all_keys(session: AsyncSession) -> list[ApiKey]:
    return list(await session.scalars(select(ApiKey).order_by(ApiKey.created_at)))


async def by_name(session: AsyncSession, tenant: str | None, name: str) -> ApiKey | None:
    """Tenant `tenant`'s key named `name`; a hub-wide key's when `tenant` is None."""
    of_tenant = ApiKey.tenant.is_(None) if tenant is None else ApiKey.tenant == tenant
    return await session.scalar(select(ApiKey).where(of_tenant, ApiKey.name == name))


async def named(session: AsyncSession, name: str) -> list[ApiKey]:
    """Every key named `name`, of any tenant (hub-wide first)."""
    query = select(ApiKey).where(ApiKey.name == name).order_by(ApiKey.tenant.nulls_first())
    return list(await session.scalars(query))


async def revoke(session: AsyncSession, key_id: str) -> bool:
    """Revoke the key; False when it was revoked already."""
    result = await session.execute(
        update(ApiKey)
        .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
        .values(revoked_at=datetime.now(UTC))
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def revoked_among(session: AsyncSession, key_ids: Collection[str]) -> list[str]:
    """Which of `key_ids` are revoked (or gone)."""
    found = await session.scalars(
        select(ApiKey.id).where(ApiKey.id.in_(key_ids), ApiKey.revoked_at.is_(None))
    )
    return sorted(set(key_ids) - set(found))
