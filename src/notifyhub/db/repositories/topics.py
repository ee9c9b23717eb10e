"""Topic rows and membership; every change takes a new version from one sequence."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import Topic, TopicMember

USER, GROUP = "user", "group"


async def upsert(session: AsyncSession, tenant: str, name: str) -> bool:
    """Create the topic if missing; True when created."""
    statement = insert(Topic).values(tenant=tenant, name=name).on_conflict_do_nothing()
    return (await session.execute(statement.returning(Topic.id))).scalar() is not None


async def bump(session: AsyncSession, tenant: str, name: str) -> tuple[int, int] | None:
    """Take the topic's row lock and a new version: (id, version), None if no such topic.

    Done first in a change, so concurrent changes to one topic serialise here and each
    reads the membership its own version stands for."""
    result = await session.execute(
        update(Topic)
        .where(Topic.tenant == tenant, Topic.name == name)
        .values(version=func.nextval("topic_version_seq"))
        .returning(Topic.id, Topic.version)
    )
    row = result.first()
    return (row[0], row[1]) if row else None


async def tombstone_version(session: AsyncSession) -> int:
    return int((await session.execute(select(func.nextval("topic_version_seq")))).scalar_one())


async def members(session: AsyncSession, topic_id: int) -> tuple[list[str], list[str]]:
    rows = await session.execute(
        select(TopicMember.kind, TopicMember.member).where(TopicMember.topic_id == topic_id)
    )
    users: list[str] = []
    groups: list[str] = []
    for kind, member in rows:
        (users if kind == USER else groups).append(member)
    return sorted(users), sorted(groups)


async def add(session: AsyncSession, topic_id: int, kind: str, names: Sequence[str]) -> None:
    for start in range(0, len(names), 5000):
        chunk = dict.fromkeys(names[start : start + 5000])
        rows = [{"topic_id": topic_id, "kind": kind, "member": n} for n in chunk]
        await session.execute(insert(TopicMember).values(rows).on_conflict_do_nothing())


async def remove(session: AsyncSession, topic_id: int, kind: str, names: Sequence[str]) -> None:
    if names:
        await session.execute(
            delete(TopicMember).where(
                TopicMember.topic_id == topic_id,
                TopicMember.kind == kind,
                TopicMember.member.in_(names),
            )
        )


async def listing_group(session: AsyncSession, tenant: str, group: str) -> list[str]:
    """The names of the tenant's topics that list `group`, in name order (the order
    their row locks are taken in, so concurrent callers cannot deadlock)."""
    rows = await session.execute(
        select(Topic.name)
        .join(TopicMember, TopicMember.topic_id == Topic.id)
        .where(Topic.tenant == tenant, TopicMember.kind == GROUP, TopicMember.member == group)
        .order_by(Topic.name)
    )
    return list(rows.scalars())


async def clear(session: AsyncSession, topic_id: int) -> None:
    await session.execute(delete(TopicMember).where(TopicMember.topic_id == topic_id))


async def drop(session: AsyncSession, tenant: str, name: str) -> bool:
    result = await session.execute(delete(Topic).where(Topic.tenant == tenant, Topic.name == name))
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def all_topics(session: AsyncSession) -> list[tuple[str, str, int, int]]:
    rows = await session.execute(select(Topic.tenant, Topic.name, Topic.id, Topic.version))
    return [(t, n, i, v) for t, n, i, v in rows]


async def find(session: AsyncSession, tenant: str, name: str) -> tuple[int, int] | None:
    """(id, version) of a topic, or None."""
    row = (
        await session.execute(
            select(Topic.id, Topic.version).where(Topic.tenant == tenant, Topic.name == name)
        )
    ).first()
    return (row[0], row[1]) if row else None
