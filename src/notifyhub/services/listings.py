"""The admin lists: a tenant's topics, rules, delivery definitions and deliveries, a page
at a time. A cursor is the last item's key (a name, or a delivery's id); each page asks
for one item more than it shows, to know whether another page follows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import listings as repo
from notifyhub.db.repositories.listings import DeliveryFilter, TopicCounts
from notifyhub.services.deliveries import definition_json, delivery_summary
from notifyhub.services.rules import RuleDefinition

T = TypeVar("T")
Page = tuple[list[T], str | None]

__all__ = [
    "DeliveryFilter",
    "Page",
    "TopicCounts",
    "definitions",
    "deliveries",
    "page",
    "rules",
    "topics",
]


def page(found: Sequence[T], limit: int, key: Callable[[T], str]) -> Page[T]:
    """The first `limit` of `found` (fetched with `limit + 1`) and the next cursor."""
    shown = list(found[:limit])
    return shown, key(shown[-1]) if len(found) > limit else None


async def topics(
    session: AsyncSession, tenant: str, cursor: str | None, limit: int
) -> Page[TopicCounts]:
    found = await repo.topics(session, tenant, cursor, limit + 1)
    return page(found, limit, lambda t: t.name)


async def rules(
    session: AsyncSession, tenant: str, cursor: str | None, limit: int
) -> Page[RuleDefinition]:
    found = [
        RuleDefinition.of(rule, recipients)
        for rule, recipients in await repo.rules(session, tenant, cursor, limit + 1)
    ]
    return page(found, limit, lambda r: r.name)


async def definitions(
    session: AsyncSession, tenant: str, cursor: str | None, limit: int
) -> Page[dict[str, Any]]:
    """Definitions as `GET /v1/admin/delivery-definitions/{name}` shows them (no secret)."""
    found = await repo.definitions(session, tenant, cursor, limit + 1)
    return page(
        [definition_json(row, show_secret=False) for row in found], limit, lambda d: str(d["name"])
    )


async def deliveries(
    session: AsyncSession, where: DeliveryFilter, cursor: str | None, limit: int
) -> Page[dict[str, Any]]:
    """Deliveries newest first, live and archived, without payloads or attempts."""
    found = await repo.deliveries(session, where, cursor, limit + 1)
    return page([delivery_summary(row) for row in found], limit, lambda d: str(d["id"]))
