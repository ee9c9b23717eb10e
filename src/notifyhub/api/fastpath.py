"""Fast paths: the two hottest requests, served before FastAPI's request machinery.

`GET /v1/me/stream`: an SSE connection lives for hours, and every frame between the
server and the stream stays alive with it. Served by the FastAPI route, each stream kept
FastAPI's router, exit stacks, dependency frames and exception wrappers, a good part of
its memory (docs/scaling.md, "Design notes"). Even as a middleware it still passed
FastAPI's and Starlette's own outer layers (the app's call, its error, telemetry and
body-limit middlewares), five frames per stream and a send wrapper every event went
through; `HubApp` hands a stream to `stream_entry` (limits, CORS when configured,
`StreamFastPath`) before any of them.

`POST /v1/notifications`: every microservice's every notification. FastAPI's dependency
solving, body handling and response validation were a large share of the hub's CPU per
publish. The fast path serves requests that parse and validate; any other request (a
body that is not JSON or does not validate, a header out of bounds) is handed on, body
replayed, to the FastAPI route, which answers it exactly as before (its 422 problem
details). The authentication runs once (the route reuses its principal).

A publish also enters before FastAPI's outer layers (`HubApp.publish_entry`: limits,
CORS when configured, metrics, `PublishFastPath`), unless OpenTelemetry tracing is on:
its instrumentation wraps the app's whole stack, and a publish keeps its server span and
the caller's trace context. Those layers (the app's call, its error, telemetry and
body-limit middlewares, each a coroutine and a wrapper per request) cost every publish
too. A request the fast path hands on goes to the stack's inner part (the app's
exception middleware and router, `HubApp.route`), never through the limits and metrics
it has passed already.

Each route has one definition, in its router module (`stream.serve`,
`notifications.serve`): the same dependencies, models and handler the FastAPI route
declares, bound to a bare request. This module adds only the transport: where a request
goes, metrics, and errors answered as the app's handlers answer them. Limits and CORS
still wrap both, and request metrics count both (a stream counts itself when its
response starts: the metrics middleware would otherwise keep a frame alive in every
stream); errors raised inside are answered as problem+json like everywhere (401, 422,
429, 503 on outages, 500 for a bug). `Settings.fast_paths = False` leaves both routes to
FastAPI (to compare the two in the bench and in tests/integration/test_route_parity.py).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notifyhub.api.deadline import late_answer
from notifyhub.api.deps import State
from notifyhub.api.errors import domain_problem, unavailable
from notifyhub.api.limits import replay
from notifyhub.api.observe import record
from notifyhub.api.routers import notifications, stream
from notifyhub.errors import NotifyhubError
from notifyhub.metrics import Metrics
from notifyhub.outages import outage_of

Handler = Callable[[Request, Any], Response | Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class RouteLabel:
    """What request metrics read from `scope["route"]` (its `path`)."""

    path: str


STREAM_ROUTE = RouteLabel(stream.PATH)
PUBLISH_ROUTE = RouteLabel(notifications.PATH)


def is_stream(scope: Scope) -> bool:
    path, method = scope["path"], scope["method"]
    return bool(path == stream.PATH and method == "GET")


def is_publish(scope: Scope) -> bool:
    return bool(scope["path"] == notifications.PATH and scope["method"] == "POST")


class HubApp(FastAPI):
    """FastAPI, except that an event stream goes straight to `stream_entry`, and a publish
    to `publish_entry` (when set)."""

    stream_entry: ASGIApp | None = None
    publish_entry: ASGIApp | None = None
    running: State | None = None
    """The lifespan's state while it runs (None before and after): for the server and tests."""
    _inner: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        http = scope["type"] == "http"
        if self.stream_entry is not None and http and is_stream(scope):
            await self.stream_entry(scope, receive, send)
        elif self.publish_entry is not None and http and is_publish(scope):
            scope["app"] = self
            await self.publish_entry(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def route(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app's stack within its own middleware (`Handoff` on): the exception
        middleware and the router, for a request an entry has limited and counted."""
        if self._inner is None:
            if self.middleware_stack is None:
                self.middleware_stack = self.build_middleware_stack()
            layer = self.middleware_stack
            while not isinstance(layer, Handoff):
                layer = layer.app  # type: ignore[attr-defined]
            self._inner = layer.app
        await self._inner(scope, receive, send)


class Handoff:
    """The innermost of the app's own middleware, a plain pass-through: where
    `HubApp.route` enters the stack."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        return self.app(scope, receive, send)


class StreamFastPath:
    """Serves event streams (the last app of `HubApp.stream_entry`).

    A stream counts itself in the request metrics when its response starts (so the
    duration is the time to the 200 or the problem, not the stream's life); no wrapper
    stays around its `send`. An unexpected error before the 200 is answered 500 by the
    app's handler and raised on, as Starlette's error middleware does."""

    def __init__(self, handlers: Mapping[Any, Handler], *, deadline_s: float | None = None) -> None:
        self.handlers = handlers
        """The app's exception handlers (the one for Exception answers a bug)."""
        self.deadline_s = deadline_s
        """How long a stream may take to open (api/deadline.py); None: unbounded."""

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        return self._stream(scope, receive, send)

    async def _stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = STREAM_ROUTE
        metrics, started = scope["state"]["metrics"], time.perf_counter()
        opened = False
        # The request deadline, until the 200: no wrapper around `send` for the stream's life.
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
        except NotifyhubError as exc:
            await domain_problem(exc)(scope, receive, _counting(send, count))
        except Exception as exc:
            late = deadline.expired() and isinstance(exc, TimeoutError)
            if late or outage_of(exc) is not None:  # a 503 if not streaming yet, else it ends
                if not opened:
                    answer = self._unavailable(scope, exc, metrics, late=late)
                    await answer(scope, receive, _counting(send, count))
                return
            if not opened:
                problem = await _answer(self.handlers[Exception], Request(scope, receive), exc)
                await problem(scope, receive, _counting(send, count))
            raise

    def _unavailable(
        self, scope: Scope, exc: Exception, metrics: Metrics, *, late: bool
    ) -> Response:
        """The 503 of a stream that could not open: a store is down, or its deadline ran
        out (`late`) while it waited on one."""
        if late:
            assert isinstance(exc, TimeoutError)
            return late_answer(scope, exc, self.deadline_s or 0, metrics)
        return unavailable(outage_of(exc), metrics)


async def _answer(handler: Handler, request: Request, exc: Exception) -> Response:
    """An exception handler's response (Starlette's handlers may be sync or async)."""
    answer = handler(request, exc)
    return await answer if inspect.isawaitable(answer) else answer


def _counting(send: Send, count: Callable[[int], None]) -> Send:
    """`send`, counting the status of the response it starts (a problem's: short-lived)."""

    async def counted(message: Message) -> None:
        if message["type"] == "http.response.start":
            count(message["status"])
        await send(message)

    return counted


class PublishFastPath:
    """Serves `POST /v1/notifications` through `notifications.serve`; what it does not
    take goes on, body replayed, to the FastAPI route.

    In the app's stack, an unexpected error is raised on to its outermost middleware,
    which answers 500; as the app's `publish_entry` (`outermost`), no such middleware is
    around it, and it answers the 500 itself (the app's handler for Exception) before
    raising on, as that middleware does."""

    def __init__(
        self, app: ASGIApp, handlers: Mapping[Any, Handler], *, outermost: bool = False
    ) -> None:
        self.app = app
        self.handlers = handlers
        """The app's exception handlers (the same dict FastAPI's middleware reads)."""
        self.outermost = outermost

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if (
            scope["type"] != "http"
            or scope["path"] != notifications.PATH
            or scope["method"] != "POST"
        ):
            return self.app(scope, receive, send)  # handed on: no frame of ours stays
        return self._publish(scope, receive, send)

    async def _publish(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = PUBLISH_ROUTE
        request = Request(scope, receive)
        try:
            response = await self._respond(request)
        except Exception as exc:
            if self.outermost:  # nothing was sent yet: answered as the outermost layer would
                problem = await _answer(self.handlers[Exception], request, exc)
                await problem(scope, receive, send)
            raise  # (in the app's stack, its outermost middleware answers 500)
        if response is not None:
            await response(scope, receive, send)
        elif self.outermost:  # FastAPI answers it, as it always has
            await self._hand_on(scope, replay(await request.body(), receive), send)
        else:
            await self.app(scope, replay(await request.body(), receive), send)

    async def _respond(self, request: Request) -> Response | None:
        """The fast path's answer (an error answered by the app's handler for it), or
        None for the FastAPI route."""
        try:
            return await notifications.serve(request)
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is None:
                raise
            return await _answer(handler, request, exc)

    async def _hand_on(self, scope: Scope, receive: Receive, send: Send) -> None:
        """To the route, answering a bug 500 if the route has not started answering."""
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if not started:
                problem = await _answer(self.handlers[Exception], Request(scope, receive), exc)
                await problem(scope, receive, send)
            raise

    def _handler_for(self, exc: Exception) -> Handler | None:
        """As Starlette's exception middleware looks one up (nearest class first)."""
        for cls in type(exc).__mro__:
            if cls is Exception:
                return None
            if cls in self.handlers:
                return self.handlers[cls]
        return None
