"""The delayed queue's HTTP API (Design 5)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response, status

from notifyhub.api.deps import Admin, AppState, Publisher, require
from notifyhub.api.schemas import (
    DelayedAccepted,
    DelayedAck,
    DelayedIn,
    DelayedPage,
    MessageId,
    Name,
)
from notifyhub.domain.auth import Scope, ServicePrincipal
from notifyhub.errors import InvalidInput
from notifyhub.services.delayed import NewMessage, due_ms_from

router = APIRouter(tags=["delayed"])
RESERVED_PREFIX = "notifyhub."
Consumer = Annotated[ServicePrincipal, Depends(require(Scope.CONSUME))]


def _public(topic: str) -> str:
    if topic.startswith(RESERVED_PREFIX):
        raise InvalidInput(f"topic: names starting with {RESERVED_PREFIX!r} are reserved")
    return topic


@router.post("/v1/delayed", status_code=status.HTTP_201_CREATED, response_model=DelayedAccepted)
async def push(body: DelayedIn, principal: Publisher, state: AppState) -> DelayedAccepted:
    _public(body.topic)
    ttl = body.ttl_ms or state["settings"].delayed.default_ttl_ms
    new = NewMessage(
        body.topic,
        body.body,
        due_ms_from(body.delay_ms, body.due_at),
        body.priority,
        ttl,
        body.biz_key,
    )
    message_id, due_at = await state["delayed"].push(new)
    return DelayedAccepted(id=message_id, due_at=due_at)


@router.get("/v1/delayed/{message_id}")
async def get(message_id: MessageId, principal: Publisher, state: AppState) -> dict[str, Any]:
    return await state["delayed"].get(message_id)


@router.delete("/v1/delayed/{message_id}", status_code=status.HTTP_204_NO_CONTENT)
async def cancel(message_id: MessageId, principal: Publisher, state: AppState) -> Response:
    await state["delayed"].cancel(message_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/topics/{topic}/messages", response_model=DelayedPage)
async def consume(
    topic: Name,
    principal: Consumer,
    state: AppState,
    wait: Annotated[int, Query(ge=0, le=60)] = 0,
    max: Annotated[int, Query(ge=1, le=100)] = 10,
) -> DelayedPage:
    return DelayedPage(messages=await state["delayed"].consume(_public(topic), wait, max))


@router.post("/v1/topics/{topic}/messages/{message_id}/ack", status_code=status.HTTP_204_NO_CONTENT)
async def ack(
    topic: Name, message_id: MessageId, body: DelayedAck, principal: Consumer, state: AppState
) -> Response:
    await state["delayed"].ack(_public(topic), message_id, body.receipt)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/v1/delayed/restore")
async def restore_all(principal: Admin, state: AppState, expired: bool = False) -> dict[str, int]:
    return {"restored": await state["delayed"].restore(expired=expired)}


@router.post("/v1/delayed/{message_id}/restore")
async def restore_one(message_id: MessageId, principal: Admin, state: AppState) -> dict[str, int]:
    return {"restored": await state["delayed"].restore(expired=True, message_id=message_id)}
