"""Rules, their per-relationship recipients, relationships and subscription opt-outs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, delete, select, text, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import Relationship, Rule, RuleRecipient, SubscriptionOptOut


async def find(session: AsyncSession, tenant: str, name: str) -> Rule | None:
    return await session.scalar(select(Rule).where(Rule.tenant == tenant, Rule.name == name))


async def upsert(
    session: AsyncSession,
    tenant: str,
    name: str,
    target_type: str,
    channels: Sequence[str] = (),
    digest: dict[str, Any] | None = None,
    escalate: Sequence[dict[str, Any]] = (),
) -> tuple[int, bool]:
    """Create or update the rule in one statement: (its id, True when created).

    The row stays locked until the caller commits, so concurrent PUTs of one rule take
    turns and each replaces the recipients whole (a find-then-insert let two PUTs both
    insert: a unique violation, a 500)."""
    statement = insert(Rule).values(
        tenant=tenant,
        name=name,
        target_type=target_type,
        channels=list(channels),
        digest=digest,
        escalate=list(escalate),
    )
    excluded = statement.excluded
    statement = statement.on_conflict_do_update(
        constraint="uq_rules_tenant_name",
        set_={
            "target_type": excluded.target_type,
            "channels": excluded.channels,
            "digest": excluded.digest,
            "escalate": excluded.escalate,
        },
    )
    row = (await session.execute(statement.returning(Rule.id, text("xmax = 0")))).one()
    return int(row[0]), bool(row[1])


async def set_recipients(
    session: AsyncSession, rule_id: int, specs: Sequence[RuleRecipient]
) -> None:
    await session.execute(delete(RuleRecipient).where(RuleRecipient.rule_id == rule_id))
    session.add_all(specs)
    await session.flush()


async def recipients(session: AsyncSession, rule_id: int) -> list[RuleRecipient]:
    query = select(RuleRecipient).where(RuleRecipient.rule_id == rule_id)
    return list(await session.scalars(query.order_by(RuleRecipient.relationship)))


async def drop(session: AsyncSession, tenant: str, name: str) -> bool:
    result = await session.execute(delete(Rule).where(Rule.tenant == tenant, Rule.name == name))
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def relate(session: AsyncSession, row: Relationship) -> None:
    values = {
        c: getattr(row, c)
        for c in ("tenant", "target_type", "target_id", "relationship", "user_id")
    }
    await session.execute(insert(Relationship).values(values).on_conflict_do_nothing())


async def unrelate(session: AsyncSession, row: Relationship) -> bool:
    result = await session.execute(
        delete(Relationship).where(
            Relationship.tenant == row.tenant,
            Relationship.target_type == row.target_type,
            Relationship.target_id == row.target_id,
            Relationship.relationship == row.relationship,
            Relationship.user_id == row.user_id,
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def related_users(
    session: AsyncSession, rule: Rule, target_id: str, relationship: str
) -> list[str]:
    """Users with `relationship` to the target, minus those who cancelled this rule there."""
    opted_out = select(SubscriptionOptOut.user_id).where(
        SubscriptionOptOut.tenant == rule.tenant,
        SubscriptionOptOut.rule_id == rule.id,
        SubscriptionOptOut.target_id == target_id,
    )
    query = select(Relationship.user_id).where(
        Relationship.tenant == rule.tenant,
        Relationship.target_type == rule.target_type,
        Relationship.target_id == target_id,
        Relationship.relationship == relationship,
        Relationship.user_id.not_in(opted_out),
    )
    return list(await session.scalars(query.order_by(Relationship.user_id)))


async def clear_opt_outs(session: AsyncSession, row: Relationship) -> None:
    rule_ids = select(Rule.id).where(Rule.tenant == row.tenant, Rule.target_type == row.target_type)
    await session.execute(
        delete(SubscriptionOptOut).where(
            SubscriptionOptOut.tenant == row.tenant,
            SubscriptionOptOut.user_id == row.user_id,
            SubscriptionOptOut.target_id == row.target_id,
            SubscriptionOptOut.rule_id.in_(rule_ids),
        )
    )


SubscriptionKey = tuple[str, str, str]
"""(rule name, target id, relationship): one subscription of a user, and their order."""


async def subscriptions(
    session: AsyncSession,
    tenant: str,
    user: str,
    after: SubscriptionKey | None = None,
    limit: int | None = None,
) -> list[tuple[str, str, str, str, str]]:
    """(rule, target type, target id, relationship, obtain) the user is subscribed to, in
    key order: the first `limit` after the key `after` (None: from the first, all)."""
    opt_out = and_(
        SubscriptionOptOut.tenant == tenant,
        SubscriptionOptOut.user_id == user,
        SubscriptionOptOut.rule_id == Rule.id,
        SubscriptionOptOut.target_id == Relationship.target_id,
    )
    key = (Rule.name, Relationship.target_id, Relationship.relationship)
    query = (
        select(
            Rule.name,
            Relationship.target_type,
            Relationship.target_id,
            Relationship.relationship,
            RuleRecipient.obtain,
        )
        .join(
            Rule,
            and_(Rule.tenant == Relationship.tenant, Rule.target_type == Relationship.target_type),
        )
        .join(
            RuleRecipient,
            and_(
                RuleRecipient.rule_id == Rule.id,
                RuleRecipient.relationship == Relationship.relationship,
            ),
        )
        .outerjoin(SubscriptionOptOut, opt_out)
        .where(
            Relationship.tenant == tenant,
            Relationship.user_id == user,
            SubscriptionOptOut.user_id.is_(None),
        )
        .order_by(*key)
        .limit(limit)
    )
    if after is not None:  # a keyset: rows added or removed before it move no page
        query = query.where(tuple_(*key) > tuple_(*after))
    return [(r, tt, ti, rel, ob) for r, tt, ti, rel, ob in await session.execute(query)]


async def opt_out(
    session: AsyncSession, tenant: str, user: str, rule_id: int, target_id: str
) -> None:
    values = {"tenant": tenant, "user_id": user, "rule_id": rule_id, "target_id": target_id}
    await session.execute(insert(SubscriptionOptOut).values(values).on_conflict_do_nothing())
