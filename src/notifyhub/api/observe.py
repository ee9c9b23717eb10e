"""Request metrics as a pure ASGI middleware (labels use the route template, not the path)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notifyhub.metrics import Metrics


def record(metrics: Metrics, method: str, route: str, status: int, seconds: float) -> None:
    """Count one request and observe its duration (through `Metrics.requests`, which
    keeps each label set's children: looking labels up costs more than counting)."""
    count, duration = metrics.requests(method, route, status)
    count.inc()
    duration.observe(seconds)


class RequestMetrics:
    """Counts every request with its status and observes how long it took.

    Requests `exempt` names count themselves: an event stream is counted when its
    response starts (api/fastpath.py), as this middleware's frame would live as long as
    the stream, hours."""

    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        *,
        exempt: Callable[[Scope], bool] = lambda scope: False,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.exempt = exempt

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http" or self.exempt(scope):
            return self.app(scope, receive, send)
        return self._observed(scope, receive, send)

    async def _observed(self, scope: Scope, receive: Receive, send: Send) -> None:
        status = 500
        started = time.perf_counter()

        async def observe(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            record(self.metrics, scope["method"], route, status, time.perf_counter() - started)
