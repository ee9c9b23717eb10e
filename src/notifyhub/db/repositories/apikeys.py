"""API key rows."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import ApiKey


async def add(session: AsyncSession, key: ApiKey) -> bool:
    """Insert a key; False when the name is taken."""
    try:
        async with session.begin_nested():
            session.add(key)
            await session.flush()
    except IntegrityError:
        return False
    return True


async def by_prefix(session: AsyncSession, prefix: str) -> ApiKey | None:
    return await session.scalar(select(ApiKey).where(ApiKey.key_prefix == prefix))


async def all_keys(session: AsyncSession) -> list[ApiKey]:
    return list(await session.scalars(select(ApiKey).order_by(ApiKey.created_at)))


async def by_name(session: AsyncSession, name: str) -> ApiKey | None:
    return await session.scalar(select(ApiKey).where(ApiKey.name == name))


async def revoke(session: AsyncSession, name: str) -> bool:
    result = await session.execute(
        update(ApiKey)
        .where(ApiKey.name == name, ApiKey.revoked_at.is_(None))
        .values(revoked_at=datetime.now(UTC))
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
