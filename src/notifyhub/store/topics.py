"""The Redis cache of topic membership (PostgreSQL is the truth; writes are version-guarded)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from notifyhub.store.keys import Keys
from notifyhub.store.scripts import InboxScripts


@dataclass(frozen=True, slots=True)
class CachedTopic:
    deleted: bool
    users: list[str]
    groups: list[str]


class TopicCache:
    def __init__(self, redis: Redis, keys: Keys, scripts: InboxScripts) -> None:
        self._redis = redis
        self._keys = keys
        self._set = scripts.topic_set
        self._get = scripts.topic_get

    async def write(
        self,
        tenant: str,
        name: str,
        version: int,
        users: Sequence[str],
        groups: Sequence[str],
        *,
        deleted: bool = False,
    ) -> bool:
        """Store this membership unless a newer version is cached already."""
        args = [version, "1" if deleted else "", len(users), *users, *groups]
        return bool(await self._set(keys=list(self._keys.topic(tenant, name)), args=args))

    async def read(self, tenant: str, name: str) -> CachedTopic | None:
        """The cached membership, or None when this topic is not cached at all."""
        deleted, users, groups = await self._get(keys=list(self._keys.topic(tenant, name)))
        if deleted == b"":
            return None
        return CachedTopic(
            deleted == b"1", sorted(u.decode() for u in users), sorted(g.decode() for g in groups)
        )
