"""Groups (roles are groups): admin operations and recipient resolution for ingest."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import groups as repo
from notifyhub.db.repositories.groups import GroupSummary
from notifyhub.db.unit import UnitOfWork
from notifyhub.errors import InvalidInput, NotFound
from notifyhub.services.topics import TopicService

MEMBER_INSERT_CHUNK = 5000


async def create_group(session: AsyncSession, tenant: str, name: str) -> bool:
    return await repo.create(session, tenant, name)


async def delete_group(unit: UnitOfWork, topics: TopicService, tenant: str, name: str) -> None:
    """Delete the group and, in the same unit, unsubscribe it from the tenant's topics
    (`TopicService.drop_group`): no topic goes on naming a group that is gone, and one
    created later under the same name is subscribed to nothing."""
    if not await repo.remove(unit.session, tenant, name):
        raise NotFound(f"no group {name} in tenant {tenant}")
    await topics.drop_group(unit, tenant, name)


async def list_groups(session: AsyncSession, tenant: str) -> list[GroupSummary]:
    return await repo.list_by_tenant(session, tenant)


async def get_group(session: AsyncSession, tenant: str, name: str) -> GroupSummary:
    found = await repo.summary(session, tenant, name)
    if found is None:
        raise NotFound(f"no group {name} in tenant {tenant}")
    return found


async def _id(session: AsyncSession, tenant: str, name: str) -> int:
    gid = await repo.group_id(session, tenant, name)
    if gid is None:
        raise NotFound(f"no group {name} in tenant {tenant}")
    return gid


async def change_members(
    session: AsyncSession, tenant: str, name: str, *, add: Sequence[str], remove: Sequence[str]
) -> GroupSummary:
    """Add, then remove; the group with its member count after the change."""
    gid = await _id(session, tenant, name)
    for start in range(0, len(add), MEMBER_INSERT_CHUNK):
        await repo.add_members(session, gid, add[start : start + MEMBER_INSERT_CHUNK])
    await repo.remove_members(session, gid, remove)
    return await get_group(session, tenant, name)


async def list_members(
    session: AsyncSession, tenant: str, name: str, *, cursor: str | None, limit: int
) -> tuple[list[str], str | None]:
    gid = await _id(session, tenant, name)
    page = await repo.members_page(session, gid, cursor, limit + 1)
    more = len(page) > limit
    page = page[:limit]
    return page, (page[-1] if more else None)


async def iter_members(
    session: AsyncSession, tenant: str, names: Sequence[str], batch: int
) -> AsyncIterator[tuple[str, list[str]]]:
    """The members of the named groups, as (group, page) in the order named (a user in
    several comes in each: the caller dedupes); unknown groups are a 422 naming them."""
    groups = await repo.named_ids(session, tenant, names)  # one query finds them and their ids
    unknown = repo.unknown(names, groups)
    if unknown:
        raise InvalidInput(f"unknown group: {', '.join(unknown)}")
    async for named in repo.iter_pages(session, groups, batch):
        yield named
