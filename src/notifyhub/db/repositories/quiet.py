"""Quiet hours: users' own weekly schedules and tenants' defaults (migration 0018)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Boolean, delete, func, literal_column, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import QuietDefault, QuietHours, UserProfile

Schedule = dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class Default:
    """A tenant's default schedule, and the zone for users who gave none."""

    schedule: Schedule
    time_zone: str | None


@dataclass(frozen=True, slots=True)
class UserQuiet:
    """What decides a user's quiet hours: their own schedule (None: the tenant's default
    applies) and their profile's time zone."""

    schedule: Schedule | None
    time_zone: str | None


async def of_user(session: AsyncSession, tenant: str, user: str) -> Schedule | None:
    """The user's own schedule (None: they have none; the tenant's default applies)."""
    row = await session.get(QuietHours, (tenant, user))
    return None if row is None else dict(row.schedule)


async def put_user(
    session: AsyncSession, tenant: str, user: str, schedule: Schedule | None
) -> None:
    """Set the user's own schedule (None removes it: the tenant's default applies)."""
    if schedule is None:
        await session.execute(
            delete(QuietHours).where(QuietHours.tenant == tenant, QuietHours.user_id == user)
        )
        return
    statement = insert(QuietHours).values(tenant=tenant, user_id=user, schedule=schedule)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[QuietHours.tenant, QuietHours.user_id],
            set_={"schedule": statement.excluded.schedule, "updated_at": func.now()},
        )
    )


async def of_users(
    session: AsyncSession, tenant: str, users: Sequence[str]
) -> dict[str, UserQuiet]:
    """Per user of `users` with a schedule or a zone: both (two statements)."""
    if not users:
        return {}
    wanted = list(users)
    own = select(QuietHours.user_id, QuietHours.schedule).where(
        QuietHours.tenant == tenant, QuietHours.user_id.in_(wanted)
    )
    zones = select(UserProfile.user_id, UserProfile.time_zone).where(
        UserProfile.tenant == tenant,
        UserProfile.user_id.in_(wanted),
        UserProfile.time_zone.is_not(None),
    )
    schedules: dict[str, Any] = {u: s for u, s in (await session.execute(own)).all()}
    found: dict[str, Any] = {u: z for u, z in (await session.execute(zones)).all()}
    return {
        user: UserQuiet(schedules.get(user), found.get(user))
        for user in set(schedules) | set(found)
    }


async def default_of(session: AsyncSession, tenant: str) -> Default | None:
    """The tenant's default (None: it set none)."""
    row = await session.get(QuietDefault, tenant)
    return None if row is None else Default(dict(row.schedule), row.time_zone)


async def put_default(
    session: AsyncSession, tenant: str, schedule: Schedule, time_zone: str | None
) -> bool:
    """Create or replace the tenant's default; whether it is new."""
    statement = insert(QuietDefault).values(tenant=tenant, schedule=schedule, time_zone=time_zone)
    upsert = statement.on_conflict_do_update(
        index_elements=[QuietDefault.tenant],
        set_={
            "schedule": statement.excluded.schedule,
            "time_zone": statement.excluded.time_zone,
            "updated_at": func.now(),
        },
    ).returning(literal_column("xmax = 0", Boolean))
    return bool((await session.execute(upsert)).scalar_one())
