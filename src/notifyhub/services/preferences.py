"""Per-user category preferences: PostgreSQL is the truth; Redis holds the copy the
deliver script consults atomically with each write."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import Preference
from notifyhub.domain.auth import UserPrincipal
from notifyhub.store.inbox import InboxStore


@dataclass(frozen=True, slots=True)
class CategoryPreference:
    inbox: bool = True
    push: bool = True

    @property
    def flags(self) -> str:
        return f"{int(self.inbox)}{int(self.push)}"


class PreferenceService:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], store: InboxStore) -> None:
        self._sessionmaker = sessionmaker
        self._store = store

    async def get(self, me: UserPrincipal) -> dict[str, CategoryPreference]:
        async with self._sessionmaker() as session:
            rows = await session.scalars(
                select(Preference).where(
                    Preference.tenant == me.tenant, Preference.user_id == me.user
                )
            )
            return {p.category: CategoryPreference(p.inbox, p.push) for p in rows}

    async def put(
        self, me: UserPrincipal, categories: dict[str, CategoryPreference]
    ) -> dict[str, CategoryPreference]:
        """Replace the user's preferences; the Redis copy follows the commit."""
        async with self._sessionmaker.begin() as session:
            await session.execute(
                delete(Preference).where(
                    Preference.tenant == me.tenant, Preference.user_id == me.user
                )
            )
            session.add_all(
                Preference(
                    tenant=me.tenant, user_id=me.user, category=c, inbox=p.inbox, push=p.push
                )
                for c, p in categories.items()
            )
        await self._store.set_preferences(
            me.tenant, me.user, {c: p.flags for c, p in categories.items()}
        )
        return categories

    async def rebuild_cache(self) -> int:
        """Copy every user's preferences into Redis (after Redis lost its data)."""
        by_user: dict[tuple[str, str], dict[str, str]] = {}
        async with self._sessionmaker() as session:
            for p in await session.scalars(select(Preference)):
                flags = CategoryPreference(p.inbox, p.push).flags
                by_user.setdefault((p.tenant, p.user_id), {})[p.category] = flags
        for (tenant, user), categories in by_user.items():
            await self._store.set_preferences(tenant, user, categories)
        return len(by_user)
