"""The live stream and the short-lived tokens browsers use to open it.

Stream requests are served by `api/fastpath.py` before they reach FastAPI's router
(an open stream then holds far less memory); the route below states the same
contract in the OpenAPI schema, and both build the stream with `open_stream`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query

from notifyhub.api.deps import AppState, CurrentUser, State, StreamUser
from notifyhub.api.schemas import StreamToken
from notifyhub.domain.auth import UserPrincipal
from notifyhub.errors import InvalidInput
from notifyhub.realtime.sse import InboxStream

router = APIRouter(prefix="/v1/me", tags=["stream"])

PATH = "/v1/me/stream"
MAX_EVENT_ID = 32


def _cursor(value: str | None) -> int | None:
    """A Last-Event-ID we did not issue resumes as -1: the stream answers with `reset`."""
    if value is None or value == "":
        return None
    if len(value) > MAX_EVENT_ID:
        raise InvalidInput(f"Last-Event-ID: at most {MAX_EVENT_ID} characters")
    return int(value) if value.isdigit() and len(value) < 19 else -1


def open_stream(state: State, me: UserPrincipal, last_event_id: str | None) -> InboxStream:
    """Attach to the hub (429 past the per-user cap) and build the stream response."""
    cursor = _cursor(last_event_id)
    sub = state["hub"].attach(me.tenant, me.user)
    return InboxStream(
        store=state["store"],
        reader=state["reader"],
        hub=state["hub"],
        clock=state["clock"],
        sub=sub,
        settings=state["settings"].stream,
        metrics=state["metrics"],
        tenant=me.tenant,
        user=me.user,
        last_event_id=cursor,
    )


# The status is declared because InboxStream takes none: FastAPI could not build the
# OpenAPI document (GET /openapi.json was a 500) without it.
@router.get(
    "/stream",
    response_class=InboxStream,
    status_code=200,
    responses={200: {"content": {"text/event-stream": {}}, "description": "Inbox events"}},
)
async def stream(
    me: StreamUser,
    state: AppState,
    last_event_id_header: Annotated[
        str | None, Header(alias="Last-Event-ID", max_length=MAX_EVENT_ID)
    ] = None,
    last_event_id: Annotated[str | None, Query(max_length=MAX_EVENT_ID)] = None,
) -> InboxStream:
    return open_stream(state, me, last_event_id_header or last_event_id)


@router.post("/stream-tokens", response_model=StreamToken)
async def stream_token(me: CurrentUser, state: AppState) -> StreamToken:
    token, expires_at = state["tokens"].mint_stream_token(me)
    return StreamToken(token=token, expires_at=expires_at)
