"""One user as the hub holds them, for an admin: inbox counts and last change seq, streams
open now in every process, preferences, rule subscriptions, groups and topics, and their
addresses (e-mail, time zone)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import memberships, profiles
from notifyhub.domain.auth import UserPrincipal
from notifyhub.domain.notification import Counts
from notifyhub.services.preferences import CategoryPreference, PreferenceService
from notifyhub.services.rules import RuleService, Subscription
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import member
from notifyhub.store.presence import StreamPresence


@dataclass(frozen=True, slots=True)
class UserReport:
    tenant: str
    user: str
    counts: Counts
    seq: int
    streams_open: int
    preferences: dict[str, CategoryPreference]
    subscriptions: list[Subscription]
    groups: list[str]
    topics: list[str]
    locale: str | None = None
    email: str | None = None
    time_zone: str | None = None


class UserLookup:
    def __init__(
        self,
        store: InboxStore,
        presence: StreamPresence,
        preferences: PreferenceService,
        rules: RuleService,
    ) -> None:
        self._store = store
        self._presence = presence
        self._preferences = preferences
        self._rules = rules

    async def streams_open(self, tenant: str, user: str) -> int:
        """The user's event streams open now, in every hub process."""
        return await self._presence.count(member(tenant, user))

    async def lookup(self, session: AsyncSession, tenant: str, user: str) -> UserReport:
        """The user `user` of `tenant` (a user nobody has written to has empty answers:
        user ids are the calling application's, not a list the hub keeps). Subscriptions,
        groups and topics: the first `memberships.LIMIT` of each, in order."""
        who = UserPrincipal(tenant, user)
        counts, seq = await self._store.counts(tenant, user)
        groups = await memberships.groups_of(session, tenant, user)
        profile = await profiles.get(session, tenant, user)
        return UserReport(
            tenant,
            user,
            counts,
            seq,
            await self._presence.count(member(tenant, user)),
            await self._preferences.get(session, who),
            await self._rules.subscriptions(session, who, limit=memberships.LIMIT),
            groups,
            await memberships.topics_of(session, tenant, user, groups),
            await self._preferences.locale(session, who),
            profile.email,
            profile.time_zone,
        )
