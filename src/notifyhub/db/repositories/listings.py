"""Keyset pages of what a tenant holds, for the admin lists: topics, rules, delivery
definitions (by name) and deliveries (newest first, live and archived together)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, literal, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import (
    Delivery,
    DeliveryDefinition,
    DeliveryHistory,
    Rule,
    RuleRecipient,
    Topic,
    TopicMember,
)


@dataclass(frozen=True, slots=True)
class TopicCounts:
    name: str
    users: int
    groups: int


@dataclass(frozen=True, slots=True)
class DeliveryFilter:
    """Which deliveries to list; None matches everything."""

    tenant: str
    statuses: tuple[str, ...] = ()
    definition: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    notification: str | None = None
    """Only the e-mails and pushes of this notification (`channels`: their payload's
    `notification.id`)."""


async def topics(
    session: AsyncSession, tenant: str, after: str | None, limit: int
) -> list[TopicCounts]:
    """Topics by name after `after`, with how many users and groups each subscribes."""
    query = (
        select(
            Topic.name,
            func.count(TopicMember.member).filter(TopicMember.kind == "user"),
            func.count(TopicMember.member).filter(TopicMember.kind == "group"),
        )
        .outerjoin(TopicMember, TopicMember.topic_id == Topic.id)
        .where(Topic.tenant == tenant, Topic.name > (after or ""))
        .group_by(Topic.id, Topic.name)
        .order_by(Topic.name)
        .limit(limit)
    )
    return [TopicCounts(n, int(u), int(g)) for n, u, g in await session.execute(query)]


async def rules(
    session: AsyncSession, tenant: str, after: str | None, limit: int
) -> list[tuple[Rule, list[RuleRecipient]]]:
    """Rules by name after `after`, each with its recipients (two queries a page)."""
    found = list(
        await session.scalars(
            select(Rule)
            .where(Rule.tenant == tenant, Rule.name > (after or ""))
            .order_by(Rule.name)
            .limit(limit)
        )
    )
    by_rule: dict[int, list[RuleRecipient]] = {rule.id: [] for rule in found}
    if by_rule:
        recipients = await session.scalars(
            select(RuleRecipient)
            .where(RuleRecipient.rule_id.in_(by_rule))
            .order_by(RuleRecipient.relationship)
        )
        for recipient in recipients:
            by_rule[recipient.rule_id].append(recipient)
    return [(rule, by_rule[rule.id]) for rule in found]


async def definitions(
    session: AsyncSession, tenant: str, after: str | None, limit: int
) -> list[DeliveryDefinition]:
    query = (
        select(DeliveryDefinition)
        .where(DeliveryDefinition.tenant == tenant, DeliveryDefinition.name > (after or ""))
        .order_by(DeliveryDefinition.name)
        .limit(limit)
    )
    return list(await session.scalars(query))


def _matching(table: Any, where: DeliveryFilter, before: str | None) -> list[ColumnElement[bool]]:
    clauses: list[ColumnElement[bool]] = [table.tenant == where.tenant]
    if before is not None:
        clauses.append(table.id < before)
    if where.statuses:
        clauses.append(table.status.in_(where.statuses))
    if where.definition is not None:
        clauses.append(table.definition == where.definition)
    if where.since is not None:
        clauses.append(table.created_at >= where.since)
    if where.until is not None:
        clauses.append(table.created_at < where.until)
    if where.notification is not None:
        clauses.append(table.payload["notification"]["id"].astext == where.notification)
    return clauses


SUMMARY_COLUMNS = (
    # a delivery's columns in the admin list (services/deliveries.py `delivery_summary`)
    "id",
    "tenant",
    "definition",
    "status",
    "description",
    "failures",
    "created_at",
    "last_attempt_at",
    "next_attempt_at",
    "last_error",
    "finished_at",
)


async def deliveries(
    session: AsyncSession, where: DeliveryFilter, before: str | None, limit: int
) -> list[dict[str, Any]]:
    """Deliveries of `where`, live and archived, newest first (ids are ULIDs) before the
    id `before`: each table answers its own first `limit`, the union is cut to `limit`."""
    parts = [
        select(*(getattr(table, c) for c in SUMMARY_COLUMNS), literal(archived).label("archived"))
        .where(*_matching(table, where, before))
        .order_by(table.id.desc())
        .limit(limit)
        for table, archived in ((Delivery, False), (DeliveryHistory, True))
    ]
    both = union_all(*parts).subquery()
    query = select(both).order_by(both.c.id.desc()).limit(limit)
    return [dict(row._mapping) for row in await session.execute(query)]
