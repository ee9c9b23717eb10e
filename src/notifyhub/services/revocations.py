"""Revocations that take effect in every hub process at once: API keys, and users' tokens.

Revoking a user's tokens sets their "not before" (PostgreSQL, the durable record, then
Redis's hash, store/revocations.py): a token issued at or before it (its `iat`, or any
token without one) is refused with a 401, and the user's streams opened with such tokens
end. Every process keeps the hash in memory, so a request's check reads no store: it is
loaded at start and again whenever the Pub/Sub listener (re)subscribes (revocations of a
gap are missed), and each revocation heard on Pub/Sub updates it (realtime/hub.py).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import revocations as repo
from notifyhub.domain.auth import UserPrincipal
from notifyhub.errors import AuthenticationError
from notifyhub.store.keys import member
from notifyhub.store.revocations import Revocation, RevocationStore

log = logging.getLogger(__name__)


class Revocations:
    """The users' "not before" times as this process knows them, and the revoking."""

    def __init__(self, store: RevocationStore) -> None:
        self._store = store
        self._not_before_s: dict[str, float] = {}
        self._loading: asyncio.Task[None] | None = None

    def check(self, principal: UserPrincipal) -> UserPrincipal:
        """`principal`, unless its token was issued at or before the user's "not before"
        (401)."""
        not_before = self._not_before_s.get(member(principal.tenant, principal.user))
        if not_before is not None and (
            principal.issued_at is None or principal.issued_at <= not_before
        ):
            raise AuthenticationError("this token was revoked; sign in again for a new one")
        return principal

    def heard(self, revocation: Revocation) -> None:
        """A revocation from Pub/Sub (the hub's `on_revocation`)."""
        if revocation.member is not None:
            self._note(revocation.member, revocation.not_before_ms)

    def _note(self, who: str, not_before_ms: int) -> None:
        not_before_s = not_before_ms / 1000
        if self._not_before_s.get(who, -1.0) < not_before_s:
            self._not_before_s[who] = not_before_s

    async def load(self) -> None:
        """Read every user's "not before" from Redis."""
        for who, ms in (await self._store.not_befores()).items():
            self._note(who, ms)

    def reload(self) -> None:
        """`load` in the background (the hub's `on_subscribed`: after a Pub/Sub gap)."""
        if self._loading is None or self._loading.done():
            self._loading = asyncio.create_task(self._load_logged(), name="notifyhub-revocations")

    async def _load_logged(self) -> None:
        try:
            await self.load()
        except Exception:
            log.warning("users' token revocations not reloaded", exc_info=True)

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

    async def restore(self, session: AsyncSession) -> None:
        """Write PostgreSQL's "not before" times back to Redis (after Redis lost data)."""
        found = await repo.all_not_befores(session)
        await self._store.restore({member(t, u): _ms(at) for t, u, at in found})


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)
