"""The live stream and the short-lived tokens browsers use to open it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query

from notifyhub.api.deps import AppState, CurrentUser, StreamUser
from notifyhub.api.schemas import StreamToken
from notifyhub.realtime.sse import InboxStream

router = APIRouter(prefix="/v1/me", tags=["stream"])


def _cursor(value: str | None) -> int | None:
    """A Last-Event-ID we did not issue resumes as -1: the stream answers with `reset`."""
    if value is None or value == "":
        return None
    return int(value) if value.isdigit() and len(value) < 19 else -1


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
        str | None, Header(alias="Last-Event-ID", max_length=32)
    ] = None,
    last_event_id: Annotated[str | None, Query(max_length=32)] = None,
) -> InboxStream:
    sub = state["hub"].attach(me.tenant, me.user)
    return InboxStream(
        store=state["store"],
        reader=state["reader"],
        hub=state["hub"],
        sub=sub,
        settings=state["settings"].stream,
        metrics=state["metrics"],
        tenant=me.tenant,
        user=me.user,
        last_event_id=_cursor(last_event_id_header or last_event_id),
    )


@router.post("/stream-tokens", response_model=StreamToken)
async def stream_token(me: CurrentUser, state: AppState) -> StreamToken:
    token, expires_at = state["tokens"].mint_stream_token(me)
    return StreamToken(token=token, expires_at=expires_at)
