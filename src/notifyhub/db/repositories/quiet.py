"""Quiet hours: users' own weekly schedules and tenants' defaults (migration 0018)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Boolean, delete, func, literal_column
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db import driver
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


_APPLYING = (
    "SELECT u.user_id, q.schedule, p.time_zone FROM unnest($2::text[]) AS u(user_id) "
    f"LEFT JOIN {QuietHours.__tablename__} q ON q.tenant = $1 AND q.user_id = u.user_id "
    f"LEFT JOIN {UserProfile.__tablename__} p ON p.tenant = $1 AND p.user_id = u.user_id "
    "WHERE q.user_id IS NOT NULL OR p.time_zone IS NOT NULL "
    "UNION ALL "
    f"SELECT NULL, schedule, time_zone FROM {QuietDefault.__tablename__} WHERE tenant = $1"
)
"""Users' own schedules and zones, and the tenant's default (the row without a user)."""


async def of_users(
    session: AsyncSession, tenant: str, users: Sequence[str]
) -> tuple[dict[str, UserQuiet], Default | None]:
    """Per user of `users` with a schedule or a zone: both; and the tenant's default.
    One statement, read by asyncpg itself in the session's transaction: a reconnect
    storm reads them for every streamed user a few at a time, and SQLAlchemy's three
    statements cost more than the reads (docs/scaling.md, "Design notes")."""
    rows = await (await driver.of_session(session)).fetch(_APPLYING, tenant, list(users))
    found: dict[str, UserQuiet] = {}
    default = None
    for user, schedule, zone in rows:
        if user is None:
            default = Default(dict(schedule), zone)
        else:
            found[user] = UserQuiet(None if schedule is None else dict(schedule), zone)
    return found, default


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
