"""Fast paths: the two hottest requests served just inside the outer middlewares.

`GET /v1/me/stream`: an SSE connection lives for hours, and every frame between the
server and the stream stays alive with it. Served by the FastAPI route, each stream
kept FastAPI's router, exit stacks, dependency frames and exception wrappers: about
6 KiB of a 28 KiB stream (measured with tracemalloc and RSS at 3k streams).

`POST /v1/notifications`: every microservice's every notification. FastAPI's dependency
solving, body handling and response validation cost about as much CPU as the rest of the
request (profiled under the ingest benchmark). The fast path serves requests that parse
and validate; any other request (a body that is not JSON or does not validate, a header
out of bounds) is handed on, body replayed, to the FastAPI route, which answers it
exactly as before (its 422 problem details). Both share `accept` and the authentication
dependency, which the fast path runs once (the route reuses its principal).

Request metrics, limits and CORS still wrap both; errors raised inside are answered by
the app's own exception handlers (problem+json: 401, 422, 429, 503 on outages). The
FastAPI routes document the same contracts in OpenAPI.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from notifyhub.api.deps import State, authenticate_service, stream_user
from notifyhub.api.errors import REDIS_OUTAGES, domain_problem, unavailable
from notifyhub.api.limits import replay
from notifyhub.api.routers import notifications
from notifyhub.api.routers.stream import PATH, open_stream
from notifyhub.api.schemas import PublishRequest
from notifyhub.domain.auth import Scope as KeyScope
from notifyhub.errors import NotifyhubError

Handler = Callable[[Request, Any], Response | Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class RouteLabel:
    """What request metrics read from `scope["route"]` (its `path`)."""

    path: str


STREAM_ROUTE = RouteLabel(PATH)
PUBLISH_ROUTE = RouteLabel(notifications.PATH)


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


class PublishFastPath:
    def __init__(self, app: ASGIApp, handlers: Mapping[Any, Handler]) -> None:
        self.app = app
        self.handlers = handlers
        """The app's exception handlers (the same dict FastAPI's middleware reads)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != notifications.PATH
            or scope["method"] != "POST"
        ):
            await self.app(scope, receive, send)
            return
        scope["route"] = PUBLISH_ROUTE
        request = Request(scope, receive)
        try:
            principal = await authenticate_service(request, KeyScope.PUBLISH)
            body = await request.body()
            parsed = _parse(request.headers, body)
            response = None
            if parsed is not None:
                response = await notifications.accept(scope["state"], principal, *parsed)
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is None:
                raise  # unexpected: the outermost middleware answers 500, as for any route
            answer = handler(request, exc)
            response = await answer if inspect.isawaitable(answer) else answer
        if response is None:  # FastAPI answers it, as it always has
            await self.app(scope, replay(body, receive), send)
        else:
            await response(scope, receive, send)

    def _handler_for(self, exc: Exception) -> Handler | None:
        """As Starlette's exception middleware looks one up (nearest class first)."""
        for cls in type(exc).__mro__:
            if cls is Exception:
                return None
            if cls in self.handlers:
                return self.handlers[cls]
        return None


def _parse(headers: Headers, body: bytes) -> tuple[PublishRequest, str | None] | None:
    """The request and its Idempotency-Key, or None when FastAPI should answer instead.

    Only the unambiguous case is taken: an `application/json` body (or no content type,
    which FastAPI parses as JSON too) that orjson parses and the model validates, as
    FastAPI validates it (`from_attributes`). orjson refuses what the standard `json`
    module would accept beyond RFC 8259 (NaN, huge integers): those go to FastAPI too."""
    key = headers.get("idempotency-key")
    if key is not None and len(key) > notifications.MAX_IDEMPOTENCY_KEY:
        return None
    content_type = headers.get("content-type")
    if content_type is not None and content_type.partition(";")[0].strip().lower() != (
        "application/json"
    ):
        return None
    try:
        request = PublishRequest.model_validate(orjson.loads(body), from_attributes=True)
    except (orjson.JSONDecodeError, ValidationError):
        return None
    return request, key
