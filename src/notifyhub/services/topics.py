"""Topics (Design 1, docs/origins.md): PostgreSQL is the truth, Redis caches membership for sends.

Every change runs in the caller's unit of work, takes the topic's row lock and a new
version first (after share-locking the groups it adds, which a group delete waits for),
and writes the cache after the unit commits; the cache refuses versions older than the
one it holds, so concurrent changes can never leave it stale.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import groups as group_repo
from notifyhub.db.repositories import topics as repo
from notifyhub.db.unit import UnitOfWork
from notifyhub.errors import InvalidInput, NotFound
from notifyhub.store.topics import TopicCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TopicMembers:
    users: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)


class TopicService:
    def __init__(self, cache: TopicCache) -> None:
        self._cache = cache

    async def replace(
        self, unit: UnitOfWork, tenant: str, name: str, members: TopicMembers
    ) -> bool:
        """Set the topic's members; True when the topic was created."""
        session = unit.session
        await _check_groups(session, tenant, members.groups)
        created = await repo.upsert(session, tenant, name)
        topic_id, version = await _bump(session, tenant, name)
        await repo.clear(session, topic_id)
        await repo.add(session, topic_id, repo.USER, members.users)
        await repo.add(session, topic_id, repo.GROUP, members.groups)
        self._write_after(unit, tenant, name, version, members)
        return created

    async def change(
        self, unit: UnitOfWork, tenant: str, name: str, add: TopicMembers, remove: TopicMembers
    ) -> TopicMembers:
        session = unit.session
        await _check_groups(session, tenant, add.groups)
        topic_id, version = await _bump(session, tenant, name)
        await repo.add(session, topic_id, repo.USER, add.users)
        await repo.add(session, topic_id, repo.GROUP, add.groups)
        await repo.remove(session, topic_id, repo.USER, remove.users)
        await repo.remove(session, topic_id, repo.GROUP, remove.groups)
        now = TopicMembers(*await repo.members(session, topic_id))
        self._write_after(unit, tenant, name, version, now)
        return now

    async def drop_group(self, unit: UnitOfWork, tenant: str, group: str) -> list[str]:
        """Unsubscribe `group` (being deleted) from every topic of the tenant listing it,
        each as a PATCH removing it would: a new version, the cache written after the
        commit. The topics changed, by name; one deleted meanwhile is skipped."""
        changed = []
        removed = TopicMembers(groups=[group])
        for name in await repo.listing_group(unit.session, tenant, group):
            try:
                await self.change(unit, tenant, name, TopicMembers(), removed)
            except NotFound:
                continue
            changed.append(name)
        return changed

    async def get(self, session: AsyncSession, tenant: str, name: str) -> TopicMembers:
        found = await repo.find(session, tenant, name)
        if found is None:
            raise NotFound(f"no topic {name} in tenant {tenant}")
        topic_id, _version = found
        return TopicMembers(*await repo.members(session, topic_id))

    async def delete(self, unit: UnitOfWork, tenant: str, name: str) -> None:
        if not await repo.drop(unit.session, tenant, name):
            raise NotFound(f"no topic {name} in tenant {tenant}")
        version = await repo.tombstone_version(unit.session)
        self._write_after(unit, tenant, name, version, None)

    def _write_after(
        self,
        unit: UnitOfWork,
        tenant: str,
        name: str,
        version: int,
        members: TopicMembers | None,
    ) -> None:
        """The cache learns `version` once it is committed (None: the topic is deleted)."""

        async def write() -> None:
            if members is None:
                await self._cache.write(tenant, name, version, [], [], deleted=True)
            else:
                await self._cache.write(tenant, name, version, members.users, members.groups)

        unit.after_commit(write)

    async def rebuild_cache(self, session: AsyncSession) -> int:
        """Write every topic from PostgreSQL into Redis (start-up, or after Redis lost data)."""
        topics = await repo.all_topics(session)
        for tenant, name, topic_id, version in topics:
            users, groups = await repo.members(session, topic_id)
            await self._cache.write(tenant, name, version, users, groups)
        return len(topics)

    async def members_of(
        self, session: AsyncSession, tenant: str, name: str
    ) -> TopicMembers | None:
        """For a send: the cache, or PostgreSQL (refilling the cache); None if unknown."""
        cached = await self._cache.read(tenant, name)
        if cached is not None:
            return None if cached.deleted else TopicMembers(cached.users, cached.groups)
        found = await repo.find(session, tenant, name)
        if found is None:
            return None
        topic_id, version = found
        users, groups = await repo.members(session, topic_id)
        await self._cache.write(tenant, name, version, users, groups)
        return TopicMembers(users, groups)

    async def iter_users(
        self, session: AsyncSession, tenant: str, names: Sequence[str], batch: int
    ) -> AsyncIterator[tuple[str, list[str]]]:
        """Every user the topics reach, as (topic, users): direct users, then members of
        listed groups resolved now (a user added to a group later gets later
        notifications); a group listed by several topics is read once, under the first
        of them in `names` (routing traces name it as the user's source)."""
        resolved = {name: await self.members_of(session, tenant, name) for name in names}
        unknown = [name for name, members in resolved.items() if members is None]
        if unknown:
            raise InvalidInput(f"unknown topic: {', '.join(unknown)}")
        groups: dict[str, str] = {}
        for name, members in resolved.items():
            assert members is not None
            if members.users:
                yield name, members.users
            for group in members.groups:
                groups.setdefault(group, name)
        if groups:
            pages = group_repo.iter_member_ids(session, tenant, list(groups), batch)
            async for group, ids in pages:
                yield groups[group], ids


async def _check_groups(session: AsyncSession, tenant: str, groups: Sequence[str]) -> None:
    """422 unless every group exists; they stay locked against a delete until the
    change commits (before the topic's row lock, the order a group delete takes them)."""
    unknown = await group_repo.missing(session, tenant, groups, lock=True) if groups else []
    if unknown:
        raise InvalidInput(f"unknown group: {', '.join(unknown)}")


async def _bump(session: AsyncSession, tenant: str, name: str) -> tuple[int, int]:
    found = await repo.bump(session, tenant, name)
    if found is None:
        raise NotFound(f"no topic {name} in tenant {tenant}")
    return found
