"""Users' token revocations ("not before" times)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import TokenRevocation


async def revoke(session: AsyncSession, tenant: str, user: str, at: datetime) -> datetime:
    """Set the user's "not before" to `at`, unless a later one is set; the one in force."""
    row = insert(TokenRevocation).values(tenant=tenant, user_id=user, not_before=at)
    later = func.greatest(TokenRevocation.not_before, row.excluded.not_before)
    upsert = row.on_conflict_do_update(
        index_elements=[TokenRevocation.tenant, TokenRevocation.user_id],
        set_={"not_before": later},
    ).returning(TokenRevocation.not_before)
    in_force: datetime = (await session.execute(upsert)).scalar_one()
    return in_force


async def all_not_befores(session: AsyncSession) -> list[tuple[str, str, datetime]]:
    """(tenant, user, not before) of every user whose tokens were revoked."""
    rows = await session.execute(
        select(TokenRevocation.tenant, TokenRevocation.user_id, TokenRevocation.not_before)
    )
    return [(t, u, at) for t, u, at in rows]
