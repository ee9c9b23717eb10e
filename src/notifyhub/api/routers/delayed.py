"""The delayed queue's HTTP API (Design 5).

A queue is one (tenant, topic). Every route names its tenant (`tenant` in the push body,
`?tenant=` elsewhere, "default" when omitted); a key bound to another tenant gets 403,
and an id of another tenant answers 404 like a missing one. Reserved topics
(`notifyhub.*`, e.g. scheduled notifications) cannot be pushed, consumed or acked here;
their tenant's own keys may read and cancel them by id, as recall does."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status

from notifyhub.api.deps import Admin, AppState, Publisher, Session, Unit, require
from notifyhub.api.schemas import (
    DelayedAccepted,
    DelayedAck,
    DelayedIn,
    DelayedMessageState,
    DelayedPage,
    DelayedReserved,
    MessageId,
    Name,
    Restored,
    Tenant,
)
from notifyhub.domain.auth import Scope, ServicePrincipal
from notifyhub.domain.notification import to_rfc3339
from notifyhub.errors import InvalidInput, PermissionDenied
from notifyhub.services.delayed import MessageState, NewMessage, Reserved, due_ms_from
from notifyhub.store.keys import Queue

router = APIRouter(tags=["delayed"])
RESERVED_PREFIX = "notifyhub."
Consumer = Annotated[ServicePrincipal, Depends(require(Scope.CONSUME))]
TenantQuery = Annotated[Tenant, Query()]


def _own(principal: ServicePrincipal, tenant: str) -> str:
    if not principal.may_act_on(tenant):
        raise PermissionDenied(f"this API key may not act on tenant {tenant}")
    return tenant


def _public(topic: str) -> str:
    if topic.startswith(RESERVED_PREFIX):
        raise InvalidInput(f"topic: names starting with {RESERVED_PREFIX!r} are reserved")
    return topic


def _queue(principal: ServicePrincipal, tenant: str, topic: str) -> Queue:
    """A public queue the key may use: 403 for another tenant, 422 for a reserved topic."""
    return Queue(_own(principal, tenant), _public(topic))


def _state(found: MessageState) -> DelayedMessageState:
    m = found.message
    return DelayedMessageState(
        id=m.id,
        tenant=m.tenant,
        topic=m.topic,
        body=m.body,
        priority=m.priority,
        ttl_ms=m.ttl_ms,
        biz_key=m.biz_key,
        due_at=to_rfc3339(m.due_at),
        status=found.status,
    )


def _reserved(taken: Reserved) -> DelayedReserved:
    m = taken.message
    return DelayedReserved(
        id=m.id,
        tenant=m.tenant,
        topic=m.topic,
        body=m.body,
        priority=m.priority,
        ttl_ms=m.ttl_ms,
        biz_key=m.biz_key,
        due_at=to_rfc3339(m.due_at),
        receipt=taken.receipt,
    )


@router.post("/v1/delayed", status_code=status.HTTP_201_CREATED, response_model=DelayedAccepted)
async def push(
    body: DelayedIn, principal: Publisher, state: AppState, unit: Unit
) -> DelayedAccepted:
    """201 once the message is committed and queued."""
    queue = _queue(principal, body.tenant, body.topic)
    ttl = body.ttl_ms or state["settings"].delayed.default_ttl_ms
    new = NewMessage(
        queue.tenant,
        queue.topic,
        body.body,
        due_ms_from(body.delay_ms, body.due_at),
        body.priority,
        ttl,
        body.biz_key,
    )
    message_id, due_at = await state["delayed"].push(unit, new)
    return DelayedAccepted(id=message_id, tenant=queue.tenant, due_at=due_at)


@router.get("/v1/delayed/{message_id}", response_model=DelayedMessageState)
async def get(
    message_id: MessageId,
    principal: Publisher,
    state: AppState,
    session: Session,
    tenant: TenantQuery = "default",
) -> DelayedMessageState:
    return _state(await state["delayed"].get(session, _own(principal, tenant), message_id))


@router.delete("/v1/delayed/{message_id}", status_code=status.HTTP_204_NO_CONTENT)
async def cancel(
    message_id: MessageId,
    principal: Publisher,
    state: AppState,
    unit: Unit,
    tenant: TenantQuery = "default",
) -> Response:
    await state["delayed"].cancel(unit, _own(principal, tenant), message_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/topics/{topic}/messages", response_model=DelayedPage)
async def consume(
    topic: Name,
    principal: Consumer,
    state: AppState,
    wait: Annotated[int, Query(ge=0, le=60)] = 0,
    max: Annotated[int, Query(ge=1, le=100)] = 10,
    tenant: TenantQuery = "default",
) -> DelayedPage:
    """A long poll: it holds no PostgreSQL session while it waits."""
    queue = _queue(principal, tenant, topic)
    taken = await state["delayed"].consume(queue, wait, max)
    return DelayedPage(messages=[_reserved(t) for t in taken])


@router.post("/v1/topics/{topic}/messages/{message_id}/ack", status_code=status.HTTP_204_NO_CONTENT)
async def ack(
    topic: Name,
    message_id: MessageId,
    body: DelayedAck,
    principal: Consumer,
    state: AppState,
    unit: Unit,
    tenant: TenantQuery = "default",
) -> Response:
    await state["delayed"].ack(unit, _queue(principal, tenant, topic), message_id, body.receipt)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/v1/delayed/restore", response_model=Restored)
async def restore_all(
    principal: Admin,
    state: AppState,
    session: Session,
    expired: bool = False,
    tenant: Annotated[Tenant | None, Query()] = None,
) -> Restored:
    """Without `tenant`: every tenant for an unbound key, its own for a bound one."""
    only = principal.tenant if tenant is None else _own(principal, tenant)
    restored = await state["delayed"].restore(session, expired=expired, tenant=only)
    return Restored(restored=restored)


@router.post("/v1/delayed/{message_id}/restore", response_model=Restored)
async def restore_one(
    message_id: MessageId,
    principal: Admin,
    state: AppState,
    session: Session,
    tenant: TenantQuery = "default",
) -> Restored:
    restored = await state["delayed"].restore_one(session, _own(principal, tenant), message_id)
    return Restored(restored=restored)
