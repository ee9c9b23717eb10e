"""The delayed queue's HTTP API (Design 5).

A queue is one (tenant, queue name). Every route names its tenant (`tenant` in the push
body, `?tenant=` elsewhere, "default" when omitted); a key bound to another tenant gets
403, and an id of another tenant answers 404 like a missing one. Reserved queues
(`notifyhub.*`, e.g. scheduled notifications) cannot be pushed, consumed or acked here;
their tenant's own keys may read and cancel them by id, as recall does.

Compatibility for one release: `/v1/topics/{topic}/messages...` answers exactly as
`/v1/queues/{queue}/messages...`, its 2xx answers with `Deprecation: true` and a `Link`
to the successor (refusals are the same problems, without them); the push body takes
`topic` for `queue` (not both); messages show both. The header is `true`, not RFC 9745's
`@<date>`: the date of deprecation is the release's, documented in the README."""

from __future__ import annotations

from typing import Annotated, Any

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
from notifyhub.errors import InvalidInput
from notifyhub.services.delayed import MessageInfo, MessageState, NewMessage, Reserved, due_ms_from
from notifyhub.store.keys import Queue

router = APIRouter(tags=["delayed"])
RESERVED_PREFIX = "notifyhub."
Consumer = Annotated[ServicePrincipal, Depends(require(Scope.CONSUME))]
TenantQuery = Annotated[Tenant, Query()]


def _public(name: str) -> str:
    if name.startswith(RESERVED_PREFIX):
        raise InvalidInput(f"queue: names starting with {RESERVED_PREFIX!r} are reserved")
    return name


def _queue(principal: ServicePrincipal, tenant: str, name: str) -> Queue:
    """A public queue the key may use: 403 for another tenant, 422 for a reserved name."""
    return Queue(principal.own(tenant), _public(name))


def _deprecated(response: Response, successor: str) -> None:
    """RFC 9745's `Deprecation` and RFC 8288's `Link` to the route that replaces it."""
    response.headers["Deprecation"] = "true"
    response.headers["Link"] = f'<{successor}>; rel="successor-version"'


def _fields(m: MessageInfo) -> dict[str, Any]:
    """What every answer about a message shows (`topic`: deprecated, the same as `queue`)."""
    return {
        "id": m.id,
        "tenant": m.tenant,
        "queue": m.queue,
        "topic": m.queue,
        "body": m.body,
        "priority": m.priority,
        "ttl_ms": m.ttl_ms,
        "biz_key": m.biz_key,
        "due_at": to_rfc3339(m.due_at),
    }


def _state(found: MessageState) -> DelayedMessageState:
    return DelayedMessageState(**_fields(found.message), status=found.status)


def _reserved(taken: Reserved) -> DelayedReserved:
    return DelayedReserved(**_fields(taken.message), receipt=taken.receipt)


@router.post("/v1/delayed", status_code=status.HTTP_201_CREATED, response_model=DelayedAccepted)
async def push(
    body: DelayedIn, principal: Publisher, state: AppState, unit: Unit
) -> DelayedAccepted:
    """201 once the message is committed and queued."""
    queue = _queue(principal, body.tenant, body.queue_name)
    ttl = body.ttl_ms or state["settings"].delayed.default_ttl_ms
    new = NewMessage(
        queue.tenant,
        queue.name,
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
    return _state(await state["delayed"].get(session, principal.own(tenant), message_id))


@router.delete("/v1/delayed/{message_id}", status_code=status.HTTP_204_NO_CONTENT)
async def cancel(
    message_id: MessageId,
    principal: Publisher,
    state: AppState,
    unit: Unit,
    tenant: TenantQuery = "default",
) -> Response:
    await state["delayed"].cancel(unit, principal.own(tenant), message_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/queues/{queue}/messages", response_model=DelayedPage)
async def consume(
    queue: Name,
    principal: Consumer,
    state: AppState,
    wait: Annotated[int, Query(ge=0, le=60)] = 0,
    max: Annotated[int, Query(ge=1, le=100)] = 10,
    tenant: TenantQuery = "default",
) -> DelayedPage:
    """A long poll: it holds no PostgreSQL session while it waits."""
    taken = await state["delayed"].consume(_queue(principal, tenant, queue), wait, max)
    return DelayedPage(messages=[_reserved(t) for t in taken])


@router.post("/v1/queues/{queue}/messages/{message_id}/ack", status_code=status.HTTP_204_NO_CONTENT)
async def ack(
    queue: Name,
    message_id: MessageId,
    body: DelayedAck,
    principal: Consumer,
    state: AppState,
    unit: Unit,
    tenant: TenantQuery = "default",
) -> Response:
    await state["delayed"].ack(unit, _queue(principal, tenant, queue), message_id, body.receipt)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/topics/{topic}/messages", response_model=DelayedPage, deprecated=True)
async def consume_topic(
    topic: Name,
    principal: Consumer,
    state: AppState,
    response: Response,
    wait: Annotated[int, Query(ge=0, le=60)] = 0,
    max: Annotated[int, Query(ge=1, le=100)] = 10,
    tenant: TenantQuery = "default",
) -> DelayedPage:
    """Deprecated: `GET /v1/queues/{queue}/messages`, answered the same (one release)."""
    _deprecated(response, f"/v1/queues/{topic}/messages")
    return await consume(topic, principal, state, wait, max, tenant)


@router.post(
    "/v1/topics/{topic}/messages/{message_id}/ack",
    status_code=status.HTTP_204_NO_CONTENT,
    deprecated=True,
)
async def ack_topic(
    topic: Name,
    message_id: MessageId,
    body: DelayedAck,
    principal: Consumer,
    state: AppState,
    unit: Unit,
    tenant: TenantQuery = "default",
) -> Response:
    """Deprecated: `POST /v1/queues/{queue}/messages/{message_id}/ack` (one release)."""
    response = await ack(topic, message_id, body, principal, state, unit, tenant)
    _deprecated(response, f"/v1/queues/{topic}/messages/{message_id}/ack")
    return response


@router.post("/v1/delayed/restore", response_model=Restored)
async def restore_all(
    principal: Admin,
    state: AppState,
    session: Session,
    expired: bool = False,
    tenant: Annotated[Tenant | None, Query()] = None,
) -> Restored:
    """Without `tenant`: every tenant for an unbound key, its own for a bound one."""
    only = principal.tenant if tenant is None else principal.own(tenant)
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
    restored = await state["delayed"].restore_one(session, principal.own(tenant), message_id)
    return Restored(restored=restored)
