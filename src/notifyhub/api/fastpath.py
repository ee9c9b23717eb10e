"""The hub's ASGI entry: one middleware chain, and the two hot routes served inside it
without FastAPI's request machinery.

`HubApp` sends every HTTP request through one chain, built once by `create_app`:
request metrics, CORS (when configured), request limits, the request deadline, then
`HotRoutes`, which hands `GET /v1/me/stream` and `POST /v1/notifications` to their
entries here and everything else to FastAPI's own stack (its error middleware,
exception handlers and router). Errors are answered by the one mapping of
api/errors.py, whichever path raised them.

`GET /v1/me/stream`: an SSE connection lives for hours, and every frame between the
server and the stream stays alive with it. `StreamEntry` serves it through
`stream.serve` (the FastAPI route's own dependencies and handler, bound to a bare
request); the chain's metrics and deadline let it through untouched (`long_lived`), and
it counts itself when its response starts and bounds only its opening.

`POST /v1/notifications`: every microservice's every notification. FastAPI's dependency
solving, body handling and response validation were a large share of the hub's CPU per
publish. `PublishEntry` serves requests that parse and validate through
`notifications.serve`; any other request (a body that is not JSON or does not validate,
a header out of bounds) is handed on, body replayed, to the FastAPI route, which answers
its 422 problem details. tests/integration/test_route_parity.py shows both answer alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notifyhub.api.deadline import late_answer
from notifyhub.api.deps import State
from notifyhub.api.errors import problem_for
from notifyhub.api.limits import replay
from notifyhub.api.observe import record
from notifyhub.api.routers import notifications, stream
from notifyhub.outages import outage_of


@dataclass(frozen=True, slots=True)
class RouteLabel:
    """What request metrics read from `scope["route"]` (its `path`)."""

    path: str


STREAM_ROUTE = RouteLabel(stream.PATH)
PUBLISH_ROUTE = RouteLabel(notifications.PATH)


class HubApp(FastAPI):
    """FastAPI, with every HTTP request passed through `chain` (set by `create_app`)."""

    chain: ASGIApp | None = None
    """The middleware chain, ending in `hot`; None: FastAPI alone (before `create_app`
    sets it)."""
    hot: HotRoutes | None = None
    running: State | None = None
    """The lifespan's state while it runs (None before and after): for the server and tests."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.chain is not None:
            scope["app"] = self
            await self.chain(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    def fastapi(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        """FastAPI's own stack: its error middleware, exception handlers and router."""
        return super().__call__(scope, receive, send)


class HotRoutes:
    """The innermost of the chain: the hot routes to their entries, any other request
    to FastAPI. `routes` cleared, FastAPI answers all (the parity test's other hub)."""

    def __init__(self, fastapi: ASGIApp, *, stream_entry: ASGIApp, publish_entry: ASGIApp) -> None:
        self.fastapi = fastapi
        self.stream_entry = stream_entry
        self.routes: dict[tuple[str, str], ASGIApp] = {
            ("GET", stream.PATH): stream_entry,
            ("POST", notifications.PATH): publish_entry,
        }

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        entry = self.routes.get((scope["method"], scope["path"]), self.fastapi)
        return entry(scope, receive, send)  # not `async`: no frame of ours stays

    def long_lived(self, scope: Scope) -> bool:
        """Whether the request is an event stream served here, which counts and bounds
        itself (the chain's metrics and deadline let it through)."""
        key = (scope["method"], scope["path"])
        return scope["type"] == "http" and self.routes.get(key) is self.stream_entry


async def _problem(request: Request, exc: Exception, send: Send) -> None:
    """Answers `exc` as the app's handlers do; a bug (500) is raised on once answered,
    as Starlette's error middleware does."""
    problem = await problem_for(request, exc)
    await problem(request.scope, request.receive, send)
    if problem.status_code == 500:
        raise exc


class StreamEntry:
    """Serves event streams through `stream.serve`.

    A stream counts itself in the request metrics when its response starts (so the
    duration is the time to the 200 or the problem, not the stream's life); no wrapper
    stays around its `send`, and its deadline ends when it opens."""

    def __init__(self, *, deadline_s: float | None = None) -> None:
        self.deadline_s = deadline_s
        """How long a stream may take to open (api/deadline.py); None: unbounded."""

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        return self._stream(scope, receive, send)

    async def _stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = STREAM_ROUTE
        metrics, started = scope["state"]["metrics"], time.perf_counter()
        opened = False
        deadline = asyncio.timeout(self.deadline_s)

        def count(status: int) -> None:
            nonlocal opened
            opened = True
            record(metrics, "GET", stream.PATH, status, time.perf_counter() - started)

        def streaming(status: int) -> None:
            if not deadline.expired():
                deadline.reschedule(None)  # open: the stream lives on
            count(status)

        try:
            async with deadline:
                response = await stream.serve(Request(scope))
                response.on_start = streaming
                # The scope's own copy of the app state (uvicorn copies its ~20 entries
                # for every request, about 1 KiB) would live as long as the stream, unused.
                scope["state"] = {}
                scope["headers"] = ()  # read, and as long-lived (api/protocol.py)
                await response(scope, receive, send)  # raises only before its 200, or a bug
        except Exception as exc:
            late = exc if deadline.expired() and isinstance(exc, TimeoutError) else None
            if opened:  # a store lost or the deadline: the stream ends; a bug is raised
                if late is not None or outage_of(exc) is not None:
                    return
                raise
            if late is not None:
                answer = late_answer(scope, late, self.deadline_s or 0, metrics)
                await answer(scope, receive, _counting(send, count))
                return
            request = Request({**scope, "state": {"metrics": metrics}}, receive)
            await _problem(request, exc, _counting(send, count))


def _counting(send: Send, count: Callable[[int], None]) -> Send:
    """`send`, counting the status of the response it starts (a problem's: short-lived)."""

    async def counted(message: Message) -> None:
        if message["type"] == "http.response.start":
            count(message["status"])
        await send(message)

    return counted


class PublishEntry:
    """Serves `POST /v1/notifications` through `notifications.serve`; what it does not
    take goes on, body replayed, to the FastAPI route."""

    def __init__(self, fastapi: ASGIApp) -> None:
        self.fastapi = fastapi

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # `async`: ASGI wrappers (OpenTelemetry's, with tracing) tell ASGI 3 apps by it.
        scope["route"] = PUBLISH_ROUTE
        request = Request(scope, receive)
        try:
            response = await notifications.serve(request)
        except Exception as exc:
            await _problem(request, exc, send)
            return
        if response is None:  # FastAPI answers it (its 422 problem details)
            await self.fastapi(scope, replay(await request.body(), receive), send)
        else:
            await response(scope, receive, send)
