"""The live stream and the short-lived tokens browsers use to open it.

`GET /v1/me/stream` has one definition, below: its parameters (`stream_user` for the
token, `resume_from` for the cursor), the stream it answers (`stream`) and its OpenAPI
declaration. `serve` binds that same definition to a bare request, without FastAPI's
request machinery: `api/fastpath.py` calls it for every stream (an open stream then holds
far less memory); the FastAPI route declares it (OpenAPI) and answers only in the parity
test, tests/integration/test_route_parity.py, which proves the two agree.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query
from starlette.requests import Request

from notifyhub.api.deps import AppState, CurrentUser, State, StreamUser, stream_user
from notifyhub.api.openapi import STREAM_EVENTS, USER
from notifyhub.api.schemas.stream import StreamToken
from notifyhub.realtime.events import MAX_AHEAD, MAX_EVENT_ID, EventId, parse_event_id
from notifyhub.realtime.sse import InboxStream

router = APIRouter(prefix="/v1/me", tags=["stream"], responses=USER)

PATH = "/v1/me/stream"
LAST_EVENT_ID = "Last-Event-ID"
LAST_EVENT_ID_QUERY = "last_event_id"
ACCESS_TOKEN = "access_token"
"""The query parameter of a stream token (`stream_user`'s parameter of that name)."""
EVENT_ID_FORMAT = (
    f"The last event id seen: `<seq>-<epoch>` (or a bare `<seq>`), then, when the stream "
    f"showed a broadcast ahead of its copy, up to {MAX_AHEAD} `.<notification id>`; ASCII, "
    f"at most {MAX_EVENT_ID} characters; anything else is a 422. An id of an older epoch "
    "(Redis lost the data) is answered with `reset`. Echo it as it came."
)
# The length is documented, not validated by FastAPI: `parse_event_id` is the one check
# (FastAPI's own `max_length` answered a different 422 than the fast path did).
_EVENT_ID_SCHEMA = {"maxLength": MAX_EVENT_ID, "examples": ["42-1f3a"]}


async def resume_from(
    header: Annotated[
        str | None,
        Header(
            alias=LAST_EVENT_ID, description=EVENT_ID_FORMAT, json_schema_extra=_EVENT_ID_SCHEMA
        ),
    ] = None,
    query: Annotated[
        str | None,
        Query(
            alias=LAST_EVENT_ID_QUERY,
            description=EVENT_ID_FORMAT,
            json_schema_extra=_EVENT_ID_SCHEMA,
        ),
    ] = None,
) -> EventId | None:
    """Where a stream resumes: the `Last-Event-ID` header, else `?last_event_id=`.

    Only ids of the form we issue (`<seq>` or `<seq>-<epoch>`, ASCII, then any ids shown
    ahead, `.<ULID>`) are taken; anything
    else is a 422 problem, naming the one that is wrong. An id of an older epoch, or above
    the user's seq, is answered by the stream with a `reset`."""
    if header:
        return parse_event_id(header, LAST_EVENT_ID)
    return parse_event_id(query, LAST_EVENT_ID_QUERY)


Cursor = Annotated[EventId | None, Depends(resume_from)]


_EVENT_LINES = "\n".join(
    f"- `{name}`: {when}; `data:` is a [{schema}](#/components/schemas/{schema})."
    for name, (schema, when) in STREAM_EVENTS.items()
)
STREAM_DESCRIPTION = f"""Server-Sent Events, UTF-8, one JSON object per `data:` line.

The stream opens with `retry: <ms>` (3000 by default: how long EventSource waits before
reconnecting), then a `counts` event. Each event is

```
event: <name>
id: <seq>-<epoch>
data: <JSON>
```

{_EVENT_LINES}

`id:` is `<seq>-<epoch>`: the user's change sequence number (every change to the inbox
takes the next one) and, in hex, the epoch it counts in (a new one whenever Redis lost the
user's data). Send the last one back as `Last-Event-ID` (EventSource does it by itself) to
receive every missed event, in order, exactly once; an id that cannot be resumed gets one
`reset` event instead. A stream that shows a big broadcast before its copy is written
adds `.<notification id>` to its ids until the copy's change comes (its `counts` event,
with no second `notification`): echo ids as they came. An idle stream carries a comment
line, `: ping`, every 15 s by default, which EventSource ignores."""
STREAM_EXAMPLE = (
    "retry: 3000\n\n"
    'event: counts\nid: 41-1f3a\ndata: {"unread":2,"unseen":0,"total":16,"seq":41}\n\n'
    'event: notification\nid: 42-1f3a\ndata: {"id":"01JD3Q4M6T9W2Z8K5N7R1C0B3X",'
    '"tenant":"default","title":"Restock location A-12","status":"unread","seen":false}\n\n'
    'event: counts\nid: 42-1f3a\ndata: {"unread":3,"unseen":1,"total":17,"seq":42}\n\n'
    ": ping\n\n"
)
"""What a stream looks like on the wire (the notification shortened)."""
_EVENT_REFS = {
    name: {"$ref": f"#/components/schemas/{schema}"} for name, (schema, _) in STREAM_EVENTS.items()
}


STREAM_CONTENT = {
    "text/event-stream": {
        "schema": {"type": "string", "x-sse-events": _EVENT_REFS},
        "example": STREAM_EXAMPLE,
    }
}
"""A user's event stream in OpenAPI (also the admin API's live tail of one)."""


# The status is declared because InboxStream takes none: FastAPI could not build the
# OpenAPI document (GET /openapi.json was a 500) without it.
@router.get(
    "/stream",
    response_class=InboxStream,
    status_code=200,
    responses={200: {"description": STREAM_DESCRIPTION, "content": STREAM_CONTENT}},
)
async def stream(me: StreamUser, state: AppState, cursor: Cursor) -> InboxStream:
    """The user's live inbox events (Server-Sent Events), resumed after the last event id
    seen. Authenticated by a user JWT, or by `?access_token=` with a stream token
    (`POST /v1/me/stream-tokens`) where EventSource cannot send headers; 429 past the
    per-user cap of open streams."""
    state["revocations"].check(me)  # again: the tokens may have been revoked meanwhile
    return open_stream(state, me.tenant, me.user, cursor, issued_at=me.issued_at)


def open_stream(
    state: State,
    tenant: str,
    user: str,
    cursor: EventId | None,
    *,
    key_id: str | None = None,
    issued_at: float | None = None,
) -> InboxStream:
    """The user's event stream, attached as one of their streams (429 at their cap);
    opened by API key `key_id` (a tail) or a token issued at `issued_at`, which a
    revocation of either ends (realtime/hub.py)."""
    return InboxStream(
        store=state["store"],
        reader=state["reader"],
        hub=state["hub"],
        clock=state["clock"],
        sub=state["hub"].attach(tenant, user, key_id=key_id, issued_at=issued_at),
        settings=state["settings"].stream,
        metrics=state["metrics"],
        tenant=tenant,
        user=user,
        last_event_id=cursor,
        tenant_views=state["views"].known,
        synced_position=state["views"].position_of,
        quiet=state["quiet_streams"].flag(tenant, user),
    )


async def serve(request: Request) -> InboxStream:
    """The route above for a bare request: its dependencies called in FastAPI's order,
    then the route itself (the request is not kept by the stream)."""
    state: State = request.scope["state"]
    query = request.query_params
    me = await stream_user(request, state, query.get(ACCESS_TOKEN))
    cursor = await resume_from(request.headers.get(LAST_EVENT_ID), query.get(LAST_EVENT_ID_QUERY))
    return await stream(me, state, cursor)


@router.post("/stream-tokens", response_model=StreamToken)
async def stream_token(me: CurrentUser, state: AppState) -> StreamToken:
    """A token for `GET /v1/me/stream?access_token=...`, valid 60 s by default."""
    token, expires_at = state["tokens"].mint_stream_token(me)
    return StreamToken(token=token, expires_at=expires_at)
