"""Per-user category preferences: PostgreSQL is the truth; Redis holds the copy the
place script consults atomically with each write."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import preferences as repo
from notifyhub.domain.auth import UserPrincipal
from notifyhub.store.inbox import InboxStore


@dataclass(frozen=True, slots=True)
class CategoryPreference:
    """One category's switch per channel: `inbox` keeps copies, `push` interrupts (the
    live stream event and Web Push alike), `email` e-mails."""

    inbox: bool = True
    push: bool = True
    email: bool = True

    @property
    def flags(self) -> str:
        """The Redis copy: inbox, push, email as 0/1 (place.lua reads the first two)."""
        return f"{int(self.inbox)}{int(self.push)}{int(self.email)}"


class PreferenceService:
    def __init__(self, store: InboxStore) -> None:
        self._store = store

    async def get(self, session: AsyncSession, me: UserPrincipal) -> dict[str, CategoryPreference]:
        rows = await repo.of_user(session, me.tenant, me.user)
        return {c: CategoryPreference(*flags) for c, flags in rows.items()}

    async def put(
        self,
        session: AsyncSession,
        me: UserPrincipal,
        categories: dict[str, CategoryPreference],
    ) -> dict[str, CategoryPreference]:
        """Replace the user's preferences. The Redis copy is written inside the caller's
        transaction, while it holds the user's turn (repo.replace), so concurrent
        replacements reach Redis in the order they commit; if Redis fails, nothing is
        committed either."""
        flags = {c: (p.inbox, p.push, p.email) for c, p in categories.items()}
        await repo.replace(session, me.tenant, me.user, flags)
        await self._store.set_preferences(
            me.tenant, me.user, {c: p.flags for c, p in categories.items()}
        )
        return categories

    async def defaults(self, session: AsyncSession, tenant: str) -> dict[str, CategoryPreference]:
        """The tenant's defaults, by category."""
        return {
            c: CategoryPreference(*f) for c, f in (await repo.defaults_of(session, tenant)).items()
        }

    async def set_defaults(
        self, session: AsyncSession, tenant: str, categories: dict[str, CategoryPreference]
    ) -> bool:
        """Replace the tenant's defaults: the channel worker's e-mail and push decisions
        for users without a row of their own for a category (PostgreSQL only: the place
        script reads one user's slot, so the inbox and live decisions follow users' own
        rows alone). True when the tenant had none before."""
        flags = {c: (p.inbox, p.push, p.email) for c, p in categories.items()}
        return await repo.replace_defaults(session, tenant, flags)

    async def locale(self, session: AsyncSession, me: UserPrincipal) -> str | None:
        return await repo.locale_of(session, me.tenant, me.user)

    async def set_locale(
        self, session: AsyncSession, me: UserPrincipal, locale: str | None
    ) -> None:
        """The user's language (None: unset): it picks rules' and producers' translations
        (services/locales.py)."""
        await repo.set_locale(session, me.tenant, me.user, locale)

    async def rebuild_cache(self, session: AsyncSession) -> int:
        """Copy every user's preferences into Redis (after Redis lost its data)."""
        by_user: dict[tuple[str, str], dict[str, str]] = {}
        for tenant, user, category, flags in await repo.all_rows(session):
            by_user.setdefault((tenant, user), {})[category] = CategoryPreference(*flags).flags
        for (tenant, user), categories in by_user.items():
            await self._store.set_preferences(tenant, user, categories)
        return len(by_user)
