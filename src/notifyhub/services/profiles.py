"""Users' addresses as admins set them: e-mail, locale and time zone, one body.

The e-mail address and time zone live in `user_profiles`; the locale stays where the
user's own `PUT /v1/me/preferences` keeps it (`user_locales`), so both ways of setting
it agree."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import preferences
from notifyhub.db.repositories import profiles as repo

FIELDS = frozenset({"email", "locale", "time_zone"})


@dataclass(frozen=True, slots=True)
class UserAddresses:
    """How to reach a user beyond their inbox (None: not given)."""

    email: str | None = None
    locale: str | None = None
    time_zone: str | None = None


class Profiles:
    async def get(self, session: AsyncSession, tenant: str, user: str) -> UserAddresses:
        profile = await repo.get(session, tenant, user)
        locale = await preferences.locale_of(session, tenant, user)
        return UserAddresses(profile.email, locale, profile.time_zone)

    async def put(
        self, session: AsyncSession, tenant: str, user: str, changes: Mapping[str, str | None]
    ) -> tuple[UserAddresses, bool]:
        """Set the fields in `changes` (None clears one); the others stay as they are.
        Whether the user had no addresses stored before."""
        unknown = set(changes) - FIELDS
        if unknown:
            raise ValueError(f"not address fields: {sorted(unknown)}")
        if "locale" in changes:
            await preferences.set_locale(session, tenant, user, changes["locale"])
        own = {k: v for k, v in changes.items() if k in repo.FIELDS}
        profile, created = await repo.put(session, tenant, user, own)
        locale = await preferences.locale_of(session, tenant, user)
        return UserAddresses(profile.email, locale, profile.time_zone), created
