"""Group and membership rows; member streams are keyset-paged for 100k-member groups."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db import driver
from notifyhub.db.models import Group, GroupMember


@dataclass(frozen=True, slots=True)
class GroupSummary:
    name: str
    members: int


async def group_id(session: AsyncSession, tenant: str, name: str) -> int | None:
    return await session.scalar(select(Group.id).where(Group.tenant == tenant, Group.name == name))


async def create(session: AsyncSession, tenant: str, name: str) -> bool:
    """Create the group; False when it already existed."""
    statement = insert(Group).values(tenant=tenant, name=name).on_conflict_do_nothing()
    result = await session.execute(statement.returning(Group.id))
    return result.scalar() is not None


async def remove(session: AsyncSession, tenant: str, name: str) -> bool:
    result = await session.execute(delete(Group).where(Group.tenant == tenant, Group.name == name))
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def list_by_tenant(session: AsyncSession, tenant: str) -> list[GroupSummary]:
    members = func.count(GroupMember.user_id)
    rows = await session.execute(
        select(Group.name, members)
        .outerjoin(GroupMember, GroupMember.group_id == Group.id)
        .where(Group.tenant == tenant)
        .group_by(Group.name)
        .order_by(Group.name)
    )
    return [GroupSummary(name, count) for name, count in rows]


async def summary(session: AsyncSession, tenant: str, name: str) -> GroupSummary | None:
    """One group and its member count, or None when the tenant has no such group."""
    members = func.count(GroupMember.user_id)
    rows = await session.execute(
        select(Group.name, members)
        .outerjoin(GroupMember, GroupMember.group_id == Group.id)
        .where(Group.tenant == tenant, Group.name == name)
        .group_by(Group.name)
    )
    row = rows.first()
    return None if row is None else GroupSummary(row[0], row[1])


async def add_members(session: AsyncSession, gid: int, users: Sequence[str]) -> None:
    if users:
        rows = [{"group_id": gid, "user_id": u} for u in dict.fromkeys(users)]
        await session.execute(insert(GroupMember).values(rows).on_conflict_do_nothing())


async def remove_members(session: AsyncSession, gid: int, users: Sequence[str]) -> None:
    if users:
        await session.execute(
            delete(GroupMember).where(GroupMember.group_id == gid, GroupMember.user_id.in_(users))
        )


async def missing(
    session: AsyncSession, tenant: str, names: Sequence[str], *, lock: bool = False
) -> list[str]:
    """The named groups that do not exist, in the order named. With `lock`, those that
    do are share-locked (FOR KEY SHARE) to the end of the transaction: a delete of one
    waits for it, and one already deleted but uncommitted is waited for and missing."""
    return unknown(names, await named_ids(session, tenant, names, lock=lock))


def unknown(names: Sequence[str], found: Sequence[tuple[str, int]]) -> list[str]:
    """Those of `names` not among `found` (`named_ids`' answer), in the order named."""
    known = {name for name, _gid in found}
    return [name for name in names if name not in known]


_MEMBER_IDS = (
    f"SELECT ARRAY(SELECT user_id FROM {GroupMember.__tablename__} "
    "WHERE group_id = $1 AND user_id > $2 ORDER BY user_id LIMIT $3)"
)
"""One page of member ids as one array: asyncpg decodes it into a list of str in C, where a
row per member cost the hub a Record each. An ARRAY of the ordered index scan, not an
`array_agg(... ORDER BY ...)`, which sorted the page again (docs/scaling.md)."""


async def members_page(session: AsyncSession, gid: int, after: str | None, limit: int) -> list[str]:
    """Member ids after `after`, in order, read by asyncpg itself in the session's
    transaction: a big fan-out reads many of them, and SQLAlchemy's row handling took
    longer than the query (docs/scaling.md, "Design notes")."""
    found = await (await driver.of_session(session)).fetchval(_MEMBER_IDS, gid, after or "", limit)
    return list(found or ())


async def named_ids(
    session: AsyncSession, tenant: str, names: Sequence[str], *, lock: bool = False
) -> list[tuple[str, int]]:
    """(name, id) of each named group that exists, in the order `names` gives them
    (`lock`: see `missing`)."""
    query = select(Group.id, Group.name).where(Group.tenant == tenant, Group.name.in_(names))
    found = await session.execute(query.with_for_update(key_share=True) if lock else query)
    order = {name: i for i, name in enumerate(names)}
    rows = sorted(found.all(), key=lambda row: order.get(row[1], len(order)))
    return [(name, gid) for gid, name in rows]


async def iter_pages(
    session: AsyncSession, groups: Sequence[tuple[str, int]], batch: int
) -> AsyncIterator[tuple[str, list[str]]]:
    """(group name, page of members) for each of `groups` ((name, id), `named_ids`) in
    turn, members in primary-key order, keyset-paged: each page is one index range scan,
    so a 100k-member group costs linear time. Overlaps between groups are left to the
    caller, which dedupes anyway (and keeps the group that reached a user first: routing
    traces)."""
    for name, gid in groups:
        page = await members_page(session, gid, "", batch)
        while page:
            yield name, page
            if len(page) < batch:  # the last page: no query to find none after it
                break
            page = await members_page(session, gid, page[-1], batch)


async def iter_member_ids(
    session: AsyncSession, tenant: str, names: Sequence[str], batch: int
) -> AsyncIterator[tuple[str, list[str]]]:
    """`iter_pages` of the named groups that exist (unknown names are skipped)."""
    async for named in iter_pages(session, await named_ids(session, tenant, names), batch):
        yield named
