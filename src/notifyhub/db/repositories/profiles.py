"""Users' addresses: the e-mail address and time zone each user of a tenant gave (the
locale stays in `user_locales`, preferences.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Boolean, func, literal_column, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import UserProfile

FIELDS = frozenset({"email", "time_zone"})
"""The columns `put` may change."""


@dataclass(frozen=True, slots=True)
class Profile:
    """A user's addresses (None: not given)."""

    email: str | None = None
    time_zone: str | None = None


async def get(session: AsyncSession, tenant: str, user: str) -> Profile:
    """The user's addresses; a user nobody gave any has an empty profile, not an error."""
    row = await session.get(UserProfile, (tenant, user))
    return Profile() if row is None else Profile(row.email, row.time_zone)


async def put(
    session: AsyncSession, tenant: str, user: str, changes: Mapping[str, str | None]
) -> tuple[Profile, bool]:
    """Set the fields named in `changes` (None clears one) and leave the others as they
    are, in one upsert (two concurrent PUTs of other fields both land); whether the
    user's row is new."""
    unknown = set(changes) - FIELDS
    if unknown:
        raise ValueError(f"not profile fields: {sorted(unknown)}")
    statement = insert(UserProfile).values(tenant=tenant, user_id=user, **changes)
    upsert = statement.on_conflict_do_update(
        index_elements=[UserProfile.tenant, UserProfile.user_id],
        set_={**{name: statement.excluded[name] for name in changes}, "updated_at": func.now()},
    ).returning(
        UserProfile.email,
        UserProfile.time_zone,
        literal_column("xmax = 0", Boolean).label("inserted"),
    )
    email, time_zone, inserted = (await session.execute(upsert)).one()
    return Profile(email, time_zone), bool(inserted)


async def emails_of(session: AsyncSession, tenant: str, users: Sequence[str]) -> dict[str, str]:
    """The e-mail addresses of those of `users` who gave one."""
    if not users:
        return {}
    rows = await session.execute(
        select(UserProfile.user_id, UserProfile.email).where(
            UserProfile.tenant == tenant,
            UserProfile.user_id.in_(list(users)),
            UserProfile.email.is_not(None),
        )
    )
    return {user: email for user, email in rows.all() if email is not None}
