"""Preference rows: per user and category, keep in the inbox? push live?"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import Preference

Flags = tuple[bool, bool]
"""(inbox, push) of one category."""


async def of_user(session: AsyncSession, tenant: str, user: str) -> dict[str, Flags]:
    rows = await session.scalars(
        select(Preference).where(Preference.tenant == tenant, Preference.user_id == user)
    )
    return {p.category: (p.inbox, p.push) for p in rows}


async def replace(
    session: AsyncSession, tenant: str, user: str, categories: Mapping[str, Flags]
) -> None:
    """Make the user's rows exactly `categories`, race-free: concurrent replacements of
    one user's preferences take turns on a transaction-scoped advisory lock, so the last
    to commit wins whole (without it, two replacements that both found no row to delete
    both inserted: a unique violation; or left a mix of both sets)."""
    key = func.hashtextextended(f"preferences:{tenant}:{user}", 0)
    await session.execute(select(func.pg_advisory_xact_lock(key)))
    await session.execute(
        delete(Preference).where(
            Preference.tenant == tenant,
            Preference.user_id == user,
            Preference.category.not_in(list(categories)),
        )
    )
    if not categories:
        return
    rows = [
        {"tenant": tenant, "user_id": user, "category": c, "inbox": inbox, "push": push}
        for c, (inbox, push) in categories.items()
    ]
    statement = insert(Preference).values(rows)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[Preference.tenant, Preference.user_id, Preference.category],
            set_={"inbox": statement.excluded.inbox, "push": statement.excluded.push},
        )
    )


async def all_rows(session: AsyncSession) -> list[tuple[str, str, str, Flags]]:
    """(tenant, user, category, flags) of every row, for rebuilding the Redis copy."""
    rows = await session.scalars(select(Preference))
    return [(p.tenant, p.user_id, p.category, (p.inbox, p.push)) for p in rows]
