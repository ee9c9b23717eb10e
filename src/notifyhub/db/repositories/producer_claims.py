"""Periodic producers' dedupe claims (migration 0021), in durable inbox mode."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import ProducerClaim


async def claim(
    session: AsyncSession, tenant: str, producer: str, digest: str, expires_at: datetime
) -> bool:
    """Claim a row for the producer until `expires_at`; False while an earlier claim of
    it has not expired."""
    table = ProducerClaim.__table__
    statement = (
        insert(ProducerClaim)
        .values(producer=producer, digest=digest, tenant=tenant, expires_at=expires_at)
        .on_conflict_do_update(
            index_elements=[table.c.producer, table.c.digest],
            set_={"tenant": tenant, "expires_at": expires_at},
            where=table.c.expires_at <= func.now(),
        )
        .returning(table.c.digest)
    )
    return (await session.execute(statement)).first() is not None


async def release(session: AsyncSession, producer: str, digest: str) -> None:
    """A claim whose notification was not sent: the next run tries the row again."""
    await session.execute(
        delete(ProducerClaim).where(
            ProducerClaim.producer == producer, ProducerClaim.digest == digest
        )
    )


async def prune(session: AsyncSession, producer: str) -> None:
    """The producer's expired claims go."""
    await session.execute(
        delete(ProducerClaim).where(
            ProducerClaim.producer == producer, ProducerClaim.expires_at <= func.now()
        )
    )
