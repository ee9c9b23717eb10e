"""Preference rows: per user and category, keep in the inbox? push (live and Web Push)?
e-mail? And each tenant's defaults per category, for users without a row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import Preference, PreferenceDefault, UserLocale

Flags = tuple[bool, bool, bool]
"""(inbox, push, email) of one category."""


async def of_user(session: AsyncSession, tenant: str, user: str) -> dict[str, Flags]:
    rows = await session.scalars(
        select(Preference).where(Preference.tenant == tenant, Preference.user_id == user)
    )
    return {p.category: (p.inbox, p.push, p.email) for p in rows}


async def of_users(
    session: AsyncSession, tenant: str, users: Sequence[str], category: str
) -> dict[str, Flags]:
    """The rows of those of `users` who have one for `category`."""
    rows = await session.scalars(
        select(Preference).where(
            Preference.tenant == tenant,
            Preference.category == category,
            Preference.user_id.in_(list(users)),
        )
    )
    return {p.user_id: (p.inbox, p.push, p.email) for p in rows}


async def defaults_of(session: AsyncSession, tenant: str) -> dict[str, Flags]:
    """The tenant's default flags, by category."""
    rows = await session.scalars(
        select(PreferenceDefault).where(PreferenceDefault.tenant == tenant)
    )
    return {d.category: (d.inbox, d.push, d.email) for d in rows}


async def default_of(session: AsyncSession, tenant: str, category: str) -> Flags | None:
    """The tenant's default flags for `category`, if it set any."""
    row = await session.scalar(
        select(PreferenceDefault).where(
            PreferenceDefault.tenant == tenant, PreferenceDefault.category == category
        )
    )
    return None if row is None else (row.inbox, row.push, row.email)


async def replace_defaults(
    session: AsyncSession, tenant: str, categories: Mapping[str, Flags]
) -> bool:
    """Make the tenant's defaults exactly `categories` (the last to commit wins whole:
    they take turns on a transaction-scoped advisory lock, as `replace` does); True when
    the tenant had none before and has some now."""
    key = func.hashtextextended(f"preference-defaults:{tenant}", 0)
    await session.execute(select(func.pg_advisory_xact_lock(key)))
    dropped = await session.execute(
        delete(PreferenceDefault)
        .where(PreferenceDefault.tenant == tenant)
        .returning(PreferenceDefault.category)
    )
    had = dropped.first() is not None
    if categories:
        rows = [
            {"tenant": tenant, "category": c, "inbox": i, "push": p, "email": e}
            for c, (i, p, e) in categories.items()
        ]
        await session.execute(insert(PreferenceDefault).values(rows))
    return not had and bool(categories)


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
        {"tenant": tenant, "user_id": user, "category": c, "inbox": i, "push": p, "email": e}
        for c, (i, p, e) in categories.items()
    ]
    statement = insert(Preference).values(rows)
    excluded = statement.excluded
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[Preference.tenant, Preference.user_id, Preference.category],
            set_={"inbox": excluded.inbox, "push": excluded.push, "email": excluded.email},
        )
    )


async def all_rows(session: AsyncSession) -> list[tuple[str, str, str, Flags]]:
    """(tenant, user, category, flags) of every row, for rebuilding the Redis copy."""
    rows = await session.scalars(select(Preference))
    return [(p.tenant, p.user_id, p.category, (p.inbox, p.push, p.email)) for p in rows]


async def locale_of(session: AsyncSession, tenant: str, user: str) -> str | None:
    return await session.scalar(
        select(UserLocale.locale).where(UserLocale.tenant == tenant, UserLocale.user_id == user)
    )


async def set_locale(session: AsyncSession, tenant: str, user: str, locale: str | None) -> None:
    """The user's locale (None: none, the templates' defaults)."""
    if locale is None:
        await session.execute(
            delete(UserLocale).where(UserLocale.tenant == tenant, UserLocale.user_id == user)
        )
        return
    statement = insert(UserLocale).values(tenant=tenant, user_id=user, locale=locale)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[UserLocale.tenant, UserLocale.user_id],
            set_={"locale": statement.excluded.locale},
        )
    )


async def locales_of(session: AsyncSession, tenant: str, users: Sequence[str]) -> dict[str, str]:
    """The locales of those of `users` who set one."""
    rows = await session.execute(
        select(UserLocale.user_id, UserLocale.locale).where(
            UserLocale.tenant == tenant, UserLocale.user_id.in_(list(users))
        )
    )
    return {user: locale for user, locale in rows.all()}
