"""The stream's fast path: `GET /v1/me/stream` served just inside the outer middlewares.

An SSE connection lives for hours, and every frame between the server and the stream
stays alive with it. Served by the FastAPI route, each stream kept FastAPI's router,
exit stacks, dependency frames and exception wrappers: about 6 KiB of a 28 KiB stream
(measured with tracemalloc and RSS at 3k streams). This middleware takes stream
requests before those layers; request metrics, limits and CORS still wrap it, and
domain errors (401, 422, 429) and Redis outages (503) are answered as problem+json
exactly as elsewhere. The
FastAPI route in `routers/stream.py` documents the same contract in OpenAPI.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from notifyhub.api.deps import State, stream_user
from notifyhub.api.errors import REDIS_OUTAGES, domain_problem, unavailable
from notifyhub.api.routers.stream import PATH, open_stream
from notifyhub.errors import NotifyhubError


@dataclass(frozen=True, slots=True)
class RouteLabel:
    """What request metrics read from `scope["route"]` (its `path`)."""

    path: str


STREAM_ROUTE = RouteLabel(PATH)


class StreamFastPath:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        scope["route"] = STREAM_ROUTE
        request = Request(scope)
        state: State = scope["state"]
        try:
            me = await stream_user(request, state, request.query_params.get("access_token"))
            last_event_id = request.headers.get("last-event-id") or request.query_params.get(
                "last_event_id"
            )
            response = open_stream(state, me, last_event_id)
            del request
            await response(scope, receive, send)  # raises only before its 200
        except NotifyhubError as exc:
            await domain_problem(exc)(scope, receive, send)
        except REDIS_OUTAGES:
            await unavailable("Redis")(scope, receive, send)
