"""A short-lived in-process cache of verified API keys, sparing PostgreSQL a hit per request.

A revoked key keeps working in a process for at most `ttl_s` (default 30 s).
"""

from __future__ import annotations

import hashlib
import time

from notifyhub.domain.auth import ServicePrincipal


class KeyCache:
    def __init__(self, ttl_s: float = 30.0, max_entries: int = 10_000) -> None:
        self._ttl_s = ttl_s
        self._max = max_entries
        self._entries: dict[str, tuple[float, ServicePrincipal]] = {}

    @staticmethod
    def _digest(presented: str) -> str:
        return hashlib.sha256(presented.encode()).hexdigest()

    def get(self, presented: str) -> ServicePrincipal | None:
        found = self._entries.get(self._digest(presented))
        if found is None or found[0] < time.monotonic():
            return None
        return found[1]

    def put(self, presented: str, principal: ServicePrincipal) -> None:
        if len(self._entries) >= self._max:
            self._entries.clear()
        self._entries[self._digest(presented)] = (time.monotonic() + self._ttl_s, principal)
