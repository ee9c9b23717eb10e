"""The hub installation's VAPID key pair: one row, made by whichever hub starts first."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import VapidKey

ROW_ID = 1


async def ensure(session: AsyncSession, private_pem: str, public_key: str) -> tuple[str, str]:
    """The stored (private PEM, public base64url) pair; `private_pem`/`public_key` are
    stored first when there is none. Two hubs starting at once both offer theirs: the
    primary key lets one insert win and the other reads the winner's."""
    await session.execute(
        insert(VapidKey)
        .values(id=ROW_ID, private_key=private_pem, public_key=public_key)
        .on_conflict_do_nothing(index_elements=[VapidKey.id])
    )
    row = (
        await session.execute(
            select(VapidKey.private_key, VapidKey.public_key).where(VapidKey.id == ROW_ID)
        )
    ).one()
    return row.private_key, row.public_key
