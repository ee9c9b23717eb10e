"""Where one user is named: the groups holding them, the topics subscribing them (by
name, or through one of those groups)."""

from __future__ import annotations

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import Group, GroupMember, Topic, TopicMember

LIMIT = 1000
"""At most this many of each, by name: a lookup, not an export."""


async def groups_of(session: AsyncSession, tenant: str, user: str) -> list[str]:
    query = (
        select(Group.name)
        .join(GroupMember, GroupMember.group_id == Group.id)
        .where(Group.tenant == tenant, GroupMember.user_id == user)
        .order_by(Group.name)
        .limit(LIMIT)
    )
    return list(await session.scalars(query))


async def topics_of(session: AsyncSession, tenant: str, user: str, groups: list[str]) -> list[str]:
    """Topics naming the user, or one of `groups` (the user's)."""
    named = and_(TopicMember.kind == "user", TopicMember.member == user)
    via_group = and_(TopicMember.kind == "group", TopicMember.member.in_(groups))
    query = (
        select(Topic.name)
        .join(TopicMember, TopicMember.topic_id == Topic.id)
        .where(Topic.tenant == tenant, or_(named, via_group) if groups else named)
        .distinct()
        .order_by(Topic.name)
        .limit(LIMIT)
    )
    return list(await session.scalars(query))
