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
from notifyhub.realtime.events import MAX_EVENT_ID, EventId, parse_event_id
from notifyhub.realtime.sse import InboxStream

router = APIRouter(prefix="/v1/me", tags=["stream"])

PATH = "/v1/me/stream"
EVENT_ID_FORMAT = (
    "The last event id seen: `<seq>-<epoch>` (or a bare `<seq>`), ASCII; anything else is "
    "a 422. An id of an older epoch (Redis lost the data) is answered with `reset`."
)


def resume_from(header: str | None, query: str | None) -> EventId | None:
    """Where a stream resumes: the `Last-Event-ID` header, else `?last_event_id=`.

    The one parser of both the fast path (api/fastpath.py) and the route below: only ids
    of the form we issue (`<seq>` or `<seq>-<epoch>`, ASCII) are taken; anything else is a
    422 problem, naming the one that is wrong. An id of an older epoch, or above the
    user's seq, is answered by the stream with a `reset`."""
    if header:
        return parse_event_id(header, "Last-Event-ID")
    return parse_event_id(query, "last_event_id")


def open_stream(
    state: State, me: UserPrincipal, header: str | None, query: str | None
) -> InboxStream:
    """Attach to the hub (429 past the per-user cap) and build the stream response."""
    cursor = resume_from(header, query)
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
        str | None,
        Header(alias="Last-Event-ID", max_length=MAX_EVENT_ID, description=EVENT_ID_FORMAT),
    ] = None,
    last_event_id: Annotated[
        str | None, Query(max_length=MAX_EVENT_ID, description=EVENT_ID_FORMAT)
    ] = None,
) -> InboxStream:
    return open_stream(state, me, last_event_id_header, last_event_id)


@router.post("/stream-tokens", response_model=StreamToken)
async def stream_token(me: CurrentUser, state: AppState) -> StreamToken:
    token, expires_at = state["tokens"].mint_stream_token(me)
    return StreamToken(token=token, expires_at=expires_at)
