"""Users' Web Push subscriptions: what a browser's `pushManager.subscribe()` gave it,
registered by the user themselves (the token says who), listed and removed by them.

An endpoint is a push service's URL the hub will POST to, so it is judged by the SSRF
guard's rule when it is stored: `https` (a literal address the guard refuses is refused
now), `http` only for addresses the deliveries' SSRF settings allow (a local push
service in tests). The guard judges again at every send (names may resolve elsewhere).
"""

from __future__ import annotations

import httpx
from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from notifyhub.db.repositories import push_subscriptions as repo
from notifyhub.db.repositories.push_subscriptions import (
    MAX_PER_USER,
    NewSubscription,
    PushSubscriptionRow,
)
from notifyhub.domain.auth import UserPrincipal
from notifyhub.errors import BlockedTarget, InvalidInput, LimitReached, NotFound
from notifyhub.services.outbound import AddressGuard, blocked_because, parse_address
from notifyhub.services.targets import ALLOW_NETWORKS_ENV, literal_addresses, sender_host


class PushSubscriptions:
    def __init__(self, guard: AddressGuard, limit: int = MAX_PER_USER) -> None:
        self._guard = guard
        self._limit = limit

    def check_endpoint(self, endpoint: str) -> None:
        """Refuse an endpoint the hub should never POST to (InvalidInput, 422)."""
        scheme = endpoint.split(":", 1)[0].lower()
        if scheme not in ("https", "http"):
            raise InvalidInput("endpoint: a push service's URL is https://...")
        host = sender_host("endpoint", endpoint)
        if not host:
            raise InvalidInput("endpoint: the URL names no host")
        if httpx.URL(endpoint).userinfo:
            raise InvalidInput("endpoint: a push service's URL carries no user or password")
        literal = literal_addresses(host)
        refusals = [
            why for a in literal or () if (why := self._guard.refusal(parse_address(a))) is not None
        ]
        if literal is not None and refusals:
            raise BlockedTarget(
                f"endpoint: the SSRF guard blocks {host} ({refusals[0]}); a local push "
                f"service needs its addresses in {ALLOW_NETWORKS_ENV}"
            )
        local = literal is not None and all(blocked_because(parse_address(a)) for a in literal)
        if scheme == "http" and not local:
            raise InvalidInput(
                "endpoint: push services are reached over https (http only for a local "
                f"address the SSRF settings allow, {ALLOW_NETWORKS_ENV})"
            )

    async def add(
        self, session: AsyncSession, me: UserPrincipal, new: NewSubscription
    ) -> tuple[PushSubscriptionRow, bool]:
        """Register the caller's subscription (the same endpoint again: updated, same id);
        whether it is new. The user's eleventh is a 409 naming the limit."""
        self.check_endpoint(new.endpoint)
        added = await repo.add(
            session, me.tenant, me.user, new, new_id=str(ULID()), limit=self._limit
        )
        if added is None:
            raise LimitReached(
                f"a user holds at most {self._limit} push subscriptions: remove one "
                "(DELETE /v1/me/push-subscriptions/{id}) before adding another",
                limit=self._limit,
            )
        return added

    async def list(self, session: AsyncSession, me: UserPrincipal) -> list[PushSubscriptionRow]:
        """The caller's subscriptions, oldest first."""
        return await repo.of_user(session, me.tenant, me.user)

    async def remove(self, session: AsyncSession, me: UserPrincipal, subscription_id: str) -> None:
        """Remove the caller's subscription; another user's or tenant's id is a 404,
        worded like an id nobody has."""
        if not await repo.remove(session, me.tenant, me.user, subscription_id):
            raise NotFound(f"no push subscription {subscription_id}")
