"""A short-lived in-process cache of verified API keys, sparing PostgreSQL a hit per request.

A key is checked against PostgreSQL again once its entry is `ttl_s` old (default 30 s). A
revoked key is dropped at once in every process: the revocation is published to them all
(store/revocations.py), and after a Pub/Sub gap, which may have missed one, every entry is
checked again (`expire_all`); the TTL bounds only what a lost message leaves. When that
check fails because PostgreSQL is unavailable, a key verified before keeps working for
up to `stale_s` past its TTL (stale-while-error): the inbox path, which needs only Redis,
keeps publishing through a PostgreSQL outage. PostgreSQL is then asked again at most
every `RECHECK_S` per key, each time for at most `CHECK_BUDGET_S`, so a hung PostgreSQL
delays one request per key and second by that, not every request by the engine's
timeouts. A key never verified cannot be checked during an outage: a 503. A key
PostgreSQL refuses (revoked, unknown) is forgotten at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from notifyhub.domain.auth import ServicePrincipal
from notifyhub.outages import outage_of

log = logging.getLogger(__name__)

RECHECK_S = 1.0
"""While PostgreSQL is unavailable, a stale key is checked again at most this often."""
CHECK_BUDGET_S = 1.0
"""How long the check of a key that could be served stale may take: a hung PostgreSQL
costs a request at most this (plus its own work's timeouts), not the engine's timeouts
twice. A revoked key thus stops working within the TTL while PostgreSQL answers this
fast (a lookup by indexed prefix takes about a millisecond)."""


@dataclass(slots=True)
class _Entry:
    principal: ServicePrincipal
    fresh_until: float
    stale_until: float


class KeyCache:
    def __init__(
        self,
        ttl_s: float = 30.0,
        stale_s: float = 3600.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        """Monotonic seconds; a test moves it to see an entry age past its TTL."""
        self._ttl_s = ttl_s
        self._stale_s = stale_s
        self._max = max_entries
        self._entries: dict[str, _Entry] = {}
        self._revoked: dict[str, None] = {}
        """Ids of keys revoked since this process started (the newest `max_entries`): a
        check that began before the revocation cannot put its key back."""

    @staticmethod
    def _digest(presented: str) -> str:
        return hashlib.sha256(presented.encode()).hexdigest()

    def get(self, presented: str) -> ServicePrincipal | None:
        """The key's principal while its entry is fresh, else None."""
        found = self._entries.get(self._digest(presented))
        if found is None or found.fresh_until <= self.clock():
            return None
        return found.principal

    def put(self, presented: str, principal: ServicePrincipal) -> None:
        if principal.key_id in self._revoked:
            return
        if len(self._entries) >= self._max:
            self._entries.clear()
        now = self.clock()
        entry = _Entry(principal, now + self._ttl_s, now + self._ttl_s + self._stale_s)
        self._entries[self._digest(presented)] = entry

    def forget(self, key_id: str) -> None:
        """Drop every entry of the key `key_id` (just revoked): it is refused at once."""
        if len(self._revoked) >= self._max:
            del self._revoked[next(iter(self._revoked))]
        self._revoked[key_id] = None
        for digest in [d for d, e in self._entries.items() if e.principal.key_id == key_id]:
            del self._entries[digest]

    def revoked(self, key_id: str) -> bool:
        """Whether this process heard that the key was revoked."""
        return key_id in self._revoked

    def expire_all(self) -> None:
        """Check every key against PostgreSQL again on its next use (a revocation may have
        been missed); the entries stay, to be served stale through a PostgreSQL outage."""
        for entry in self._entries.values():
            entry.fresh_until = 0.0

    async def verify(
        self, presented: str, check: Callable[[], Awaitable[ServicePrincipal]]
    ) -> ServicePrincipal:
        """The key's principal: cached while fresh, else from `check` (PostgreSQL), else
        the stale one within `stale_s` when PostgreSQL fails or does not answer within
        `CHECK_BUDGET_S`. `check`'s other errors (an invalid or revoked key) drop the
        entry and propagate."""
        principal = self.get(presented)
        if principal is not None:
            return principal
        digest = self._digest(presented)
        stale = self._stale(digest)
        try:
            if stale is None:
                principal = await check()
            else:
                async with asyncio.timeout(CHECK_BUDGET_S):
                    principal = await check()
        except Exception as exc:
            outage = isinstance(exc, TimeoutError) or outage_of(exc) == "postgres"
            if stale is None or not outage:
                self._entries.pop(digest, None)
                raise
            stale.fresh_until = self.clock() + RECHECK_S
            log.warning("API key %s served stale: PostgreSQL unavailable", stale.principal.name)
            return stale.principal
        self.put(presented, principal)
        return principal

    def _stale(self, digest: str) -> _Entry | None:
        """The key's expired entry while it may still be served, else None."""
        entry = self._entries.get(digest)
        return entry if entry is not None and self.clock() < entry.stale_until else None
