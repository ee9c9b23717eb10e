"""Admin API: a tenant's topics, rules, delivery definitions, delayed queues and
deliveries, listed a page at a time (as `GET /v1/admin/groups/{group}/members`: a
`cursor` from the previous page's `next_cursor`, and a `limit`)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from notifyhub.api.deps import Admin, AppState, Unit
from notifyhub.api.openapi import SERVICE
from notifyhub.api.paging import CursorQuery, LimitQuery, SinceQuery, UntilQuery
from notifyhub.api.params import TenantQuery
from notifyhub.api.schemas.common import Name, NotificationId
from notifyhub.api.schemas.delayed import QueueOut, QueuePage
from notifyhub.api.schemas.deliveries import (
    DefinitionOut,
    DefinitionPage,
    DeliveryPage,
    DeliverySummary,
)
from notifyhub.api.schemas.rules import RuleOut, RulePage
from notifyhub.api.schemas.topics import TopicPage, TopicSummary
from notifyhub.domain.delivery import DeliveryStatus
from notifyhub.services import listings

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)


@router.get("/topics", response_model=TopicPage)
async def list_topics(
    principal: Admin,
    unit: Unit,
    tenant: TenantQuery = "default",
    cursor: CursorQuery = None,
    limit: LimitQuery = 100,
) -> TopicPage:
    """The tenant's topics by name, with how many users and groups each subscribes."""
    found, next_cursor = await listings.topics(unit.session, principal.own(tenant), cursor, limit)
    topics = [
        TopicSummary(name=t.name, tenant=tenant, user_count=t.users, group_count=t.groups)
        for t in found
    ]
    return TopicPage(topics=topics, next_cursor=next_cursor)


@router.get("/rules", response_model=RulePage)
async def list_rules(
    principal: Admin,
    unit: Unit,
    tenant: TenantQuery = "default",
    cursor: CursorQuery = None,
    limit: LimitQuery = 100,
) -> RulePage:
    """The tenant's rules by name, each whole."""
    found, next_cursor = await listings.rules(unit.session, principal.own(tenant), cursor, limit)
    return RulePage(rules=[RuleOut.of(r, tenant) for r in found], next_cursor=next_cursor)


@router.get(
    "/delivery-definitions", response_model=DefinitionPage, response_model_exclude_unset=True
)
async def list_definitions(
    principal: Admin,
    unit: Unit,
    tenant: TenantQuery = "default",
    cursor: CursorQuery = None,
    limit: LimitQuery = 100,
) -> DefinitionPage:
    """The tenant's delivery definitions by name (never their secrets)."""
    found, next_cursor = await listings.definitions(
        unit.session, principal.own(tenant), cursor, limit
    )
    return DefinitionPage(
        definitions=[DefinitionOut.model_validate(d) for d in found], next_cursor=next_cursor
    )


@router.get("/queues", response_model=QueuePage)
async def list_queues(
    principal: Admin,
    state: AppState,
    tenant: TenantQuery = "default",
    cursor: CursorQuery = None,
    limit: LimitQuery = 100,
    internal: Annotated[
        bool,
        Query(
            description="Also the hub's internal queues (`notifyhub.scheduled`: scheduled "
            "notifications, `notifyhub.snoozed`: snooze ends).",
            examples=[True],
        ),
    ] = False,
) -> QueuePage:
    """The tenant's delayed queues by name, counted in Redis now: messages delayed, ready
    and in flight, and how long the longest-waiting due message has waited. The hub's
    internal queues only with `internal=true`."""
    delayed, own = state["delayed"], principal.own(tenant)
    found, next_cursor = await delayed.queue_stats(own, cursor, limit, internal=internal)
    queues = [
        QueueOut(
            tenant=s.queue.tenant,
            name=s.queue.name,
            depth=s.delayed + s.ready,
            delayed=s.delayed,
            ready=s.ready,
            in_flight=s.in_flight,
            oldest_age_ms=s.oldest_age_ms,
        )
        for s in found
    ]
    return QueuePage(queues=queues, next_cursor=next_cursor)


StatusName = Literal["pending", "sent", "failed", "final_failed", "awaiting_confirm"]
"""`DeliveryStatus`'s values, inline (a parameter's schema cannot name a component)."""
StatusQuery = Annotated[
    list[StatusName] | None,
    Query(
        max_length=5,
        description="Only deliveries in these statuses (repeat the parameter for several).",
        examples=[["failed", "final_failed"]],
    ),
]
DefinitionQuery = Annotated[
    Name | None,
    Query(description="Only deliveries through this definition.", examples=["erp-orders"]),
]

NotificationQuery = Annotated[
    NotificationId | None,
    Query(
        description="Only the e-mails and Web Pushes of this notification (its `channels`).",
        examples=["01JD3Q4M6T9W2Z8K5N7R1C0B3X"],
    ),
]


@router.get("/deliveries", response_model=DeliveryPage)
async def list_deliveries(
    principal: Admin,
    unit: Unit,
    tenant: TenantQuery = "default",
    status: StatusQuery = None,
    definition: DefinitionQuery = None,
    since: SinceQuery = None,
    until: UntilQuery = None,
    notification: NotificationQuery = None,
    cursor: CursorQuery = None,
    limit: LimitQuery = 100,
) -> DeliveryPage:
    """The tenant's deliveries, newest first, live and archived, filtered by status,
    definition, creation time (`since` inclusive, `until` exclusive) and the
    notification whose e-mails and pushes they are."""
    statuses = tuple(DeliveryStatus(s) for s in status or ())
    where = listings.DeliveryFilter(
        principal.own(tenant), statuses, definition, since, until, notification
    )
    found, next_cursor = await listings.deliveries(unit.session, where, cursor, limit)
    return DeliveryPage(
        deliveries=[DeliverySummary.model_validate(d) for d in found], next_cursor=next_cursor
    )
