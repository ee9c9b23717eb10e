"""Revocations that take effect in every hub process at once: API keys, and users' tokens.

Revoking a user's tokens sets their "not before" (PostgreSQL, the durable record, then
Redis's hash, store/revocations.py): a token issued at or before it (its `iat`, or any
token without one) is refused with a 401, and the user's streams opened with such tokens
end. Every process keeps the hash in memory, so a request's check reads no store: it is
loaded at start, each revocation heard on Pub/Sub updates it (realtime/hub.py), and
whenever the Pub/Sub listener subscribes again (it may have missed revocations) it is
read again and the local streams of revoked keys and tokens are ended (`catch_up`).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import apikeys
from notifyhub.db.repositories import revocations as repo
from notifyhub.db.unit import Units
from notifyhub.domain.auth import UserPrincipal
from notifyhub.errors import AuthenticationError
from notifyhub.realtime.hub import Hub
from notifyhub.store.keys import Keys, member
from notifyhub.store.revocations import Revocation, RevocationStore, restore

log = logging.getLogger(__name__)


class Revocations:
    """The users' "not before" times as this process knows them, and the revoking. After
    a Pub/Sub gap a background task (no caller) reads revoked keys in a unit of its own."""

    def __init__(
        self,
        store: RevocationStore,
        hub: Hub | None = None,
        units: Units | None = None,
    ) -> None:
        self._store = store
        self._hub = hub
        self._units = units
        self._not_before_ms: dict[str, int] = {}
        self._loading: asyncio.Task[None] | None = None

    def check(self, principal: UserPrincipal) -> UserPrincipal:
        """`principal`, unless its token was issued at or before the user's "not before"
        (401)."""
        not_before = self._not_before_ms.get(member(principal.tenant, principal.user))
        if not_before is not None and (
            principal.issued_at is None or principal.issued_at * 1000 <= not_before
        ):
            raise AuthenticationError("this token was revoked; sign in again for a new one")
        return principal

    def heard(self, revocation: Revocation) -> None:
        """A revocation from Pub/Sub (the hub's `on_revocation`)."""
        if revocation.member is not None:
            self._note(revocation.member, revocation.not_before_ms)

    def _note(self, who: str, not_before_ms: int) -> None:
        if self._not_before_ms.get(who, -1) < not_before_ms:
            self._not_before_ms[who] = not_before_ms

    async def load(self) -> None:
        """Read every user's "not before" from Redis."""
        for who, ms in (await self._store.not_befores()).items():
            self._note(who, ms)

    def reload(self) -> None:
        """`catch_up` in the background (the hub's `on_subscribed`)."""
        if self._loading is None or self._loading.done():
            self._loading = asyncio.create_task(self._catch_up(), name="notifyhub-revocations")

    async def _catch_up(self) -> None:
        try:
            await self.catch_up()
        except Exception:
            log.warning("revocations of a Pub/Sub gap not caught up", exc_info=True)

    async def catch_up(self) -> None:
        """What revocations Pub/Sub may have missed: read the "not before" times again,
        and end the local streams of revoked tokens and of revoked keys (PostgreSQL)."""
        await self.load()
        if self._hub is None:
            return
        for who in self._hub.local_streams().keys() & self._not_before_ms.keys():
            self._hub.revoke(Revocation(member=who, not_before_ms=self._not_before_ms[who]))
        keys = self._hub.tail_keys()
        if keys and self._units is not None:
            async with self._units() as unit:
                session = unit.session
                revoked = await apikeys.revoked_among(session, keys)
            for key_id in revoked:
                self._hub.revoke(Revocation(key_id=key_id))

    async def close(self) -> None:
        if self._loading is not None:
            self._loading.cancel()
            await asyncio.gather(self._loading, return_exceptions=True)

    async def revoke_user(self, session: AsyncSession, tenant: str, user: str) -> datetime:
        """Record the user's new "not before" (now) in the session's transaction; the one
        in force (a later one set meanwhile stays). `announce_user` after the commit."""
        return await repo.revoke(session, tenant, user, datetime.now(UTC))

    async def announce_user(self, tenant: str, user: str, not_before: datetime) -> None:
        """Refuse the user's older tokens here at once, and in every process (which end
        the user's streams opened with them)."""
        who, ms = member(tenant, user), _ms(not_before)
        self._note(who, ms)
        await self._store.set_not_before(who, ms)
        await self._store.announce(Revocation(member=who, not_before_ms=ms))

    async def announce_key(self, key_id: str) -> None:
        """Tell every process that API key `key_id` was revoked (each forgets it and ends
        the streams it opened)."""
        await self._store.announce(Revocation(key_id=key_id))


async def rebuild_cache(session: AsyncSession, redis: Any, keys: Keys) -> int:
    """Redis's "not before" times from PostgreSQL (the epoch watch, after Redis lost data);
    how many users have one."""
    found = await repo.all_not_befores(session)
    await restore(redis, keys, {member(t, u): _ms(at) for t, u, at in found})
    return len(found)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)
