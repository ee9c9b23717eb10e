"""The delayed queue's HTTP API.

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
from notifyhub.api.openapi import CONFLICT, NOT_FOUND, SERVICE
from notifyhub.api.params import (
    DeprecatedTopicPath,
    MessageIdPath,
    QueuePath,
    TenantQuery,
)
from notifyhub.api.schemas.common import Tenant
from notifyhub.api.schemas.delayed import (
    DelayedAccepted,
    DelayedAck,
    DelayedIn,
    DelayedMessageState,
    DelayedPage,
    DelayedReserved,
    Restored,
)
from notifyhub.domain.auth import Scope, ServicePrincipal
from notifyhub.domain.notification import to_rfc3339
from notifyhub.errors import InvalidInput
from notifyhub.services.delayed import (
    RESERVED_PREFIX,
    MessageInfo,
    MessageState,
    NewMessage,
    Reserved,
    due_ms_from,
)
from notifyhub.store.keys import Queue

router = APIRouter(tags=["delayed"], responses=SERVICE)
Consumer = Annotated[ServicePrincipal, Depends(require(Scope.CONSUME))]
Wait = Annotated[
    int,
    Query(ge=0, le=60, description="Seconds to wait for a ready message (0: none).", examples=[20]),
]
Max = Annotated[int, Query(ge=1, le=100, description="At most this many messages.", examples=[10])]
GONE_OR_TAKEN = {**NOT_FOUND, **CONFLICT}


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
    """Queue a message for later: 201 once it is committed and queued."""
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


@router.get("/v1/delayed/{message_id}", response_model=DelayedMessageState, responses=NOT_FOUND)
async def get(
    message_id: MessageIdPath,
    principal: Publisher,
    state: AppState,
    session: Session,
    tenant: TenantQuery = "default",
) -> DelayedMessageState:
    """The message and its status (scheduled notifications of the tenant too)."""
    return _state(await state["delayed"].get(session, principal.own(tenant), message_id))


@router.delete(
    "/v1/delayed/{message_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=GONE_OR_TAKEN,
)
async def cancel(
    message_id: MessageIdPath,
    principal: Publisher,
    state: AppState,
    unit: Unit,
    tenant: TenantQuery = "default",
) -> Response:
    """Cancel the message; 409 once it is reserved or consumed."""
    await state["delayed"].cancel(unit, principal.own(tenant), message_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/queues/{queue}/messages", response_model=DelayedPage)
async def consume(
    queue: QueuePath,
    principal: Consumer,
    state: AppState,
    wait: Wait = 0,
    max: Max = 10,
    tenant: TenantQuery = "default",
) -> DelayedPage:
    """Take ready messages (a long poll up to `wait` seconds); ack each within its `ttl_ms`
    or it is offered again."""
    taken = await state["delayed"].consume(_queue(principal, tenant, queue), wait, max)
    return DelayedPage(messages=[_reserved(t) for t in taken])


@router.post(
    "/v1/queues/{queue}/messages/{message_id}/ack",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=GONE_OR_TAKEN,
)
async def ack(
    queue: QueuePath,
    message_id: MessageIdPath,
    body: DelayedAck,
    principal: Consumer,
    state: AppState,
    unit: Unit,
    tenant: TenantQuery = "default",
) -> Response:
    """The message is consumed; 409 when it is not reserved, or the receipt is not its
    current reservation's (it was offered again after its ttl, or the receipt is made up)."""
    await state["delayed"].ack(unit, _queue(principal, tenant, queue), message_id, body.receipt)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/topics/{topic}/messages", response_model=DelayedPage, deprecated=True)
async def consume_topic(
    topic: DeprecatedTopicPath,
    principal: Consumer,
    state: AppState,
    response: Response,
    wait: Wait = 0,
    max: Max = 10,
    tenant: TenantQuery = "default",
) -> DelayedPage:
    """Deprecated: `GET /v1/queues/{queue}/messages`, answered the same (one release)."""
    _deprecated(response, f"/v1/queues/{topic}/messages")
    return await consume(topic, principal, state, wait, max, tenant)


@router.post(
    "/v1/topics/{topic}/messages/{message_id}/ack",
    status_code=status.HTTP_204_NO_CONTENT,
    deprecated=True,
    responses=GONE_OR_TAKEN,
)
async def ack_topic(
    topic: DeprecatedTopicPath,
    message_id: MessageIdPath,
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
    expired: Annotated[
        bool,
        Query(
            description="Also re-queue messages whose ttl ran out while reserved (the "
            "log's last record of them: taken by a consumer, never acked). Without it, every "
            "other message not consumed or cancelled, due or not.",
            examples=[False],
        ),
    ] = False,
    tenant: Annotated[
        Tenant | None,
        Query(
            description="Only this tenant; omitted: every tenant for an unbound key, its "
            "own for a bound one.",
            examples=["default"],
        ),
    ] = None,
) -> Restored:
    """Rebuild the queues' Redis state from the PostgreSQL log: re-queue what Redis lost
    of the messages not consumed or cancelled (reserved ones only with `expired`)."""
    only = principal.tenant if tenant is None else principal.own(tenant)
    restored = await state["delayed"].restore(session, expired=expired, tenant=only)
    return Restored(restored=restored)


@router.post("/v1/delayed/{message_id}/restore", response_model=Restored, responses=NOT_FOUND)
async def restore_one(
    message_id: MessageIdPath,
    principal: Admin,
    state: AppState,
    session: Session,
    tenant: TenantQuery = "default",
) -> Restored:
    """Rebuild one message's Redis state from PostgreSQL."""
    restored = await state["delayed"].restore_one(session, principal.own(tenant), message_id)
    return Restored(restored=restored)
