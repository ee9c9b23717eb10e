"""Request metrics as a pure ASGI middleware (labels use the route template, not the path)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notifyhub.metrics import Metrics


def record(metrics: Metrics, method: str, route: str, status: int, seconds: float) -> None:
    """Count one request and observe its duration."""
    metrics.http_requests_total.labels(method, route, str(status)).inc()
    metrics.http_request_duration_seconds.labels(method, route).observe(seconds)


class RequestMetrics:
    """Counts every request with its status and observes how long it took.

    Requests `counts_itself(scope)` names are handed straight on: they record their own
    metrics (the event stream, whose request lasts hours; this middleware's frame would
    live as long, in every stream)."""

    def __init__(
        self, app: ASGIApp, metrics: Metrics, counts_itself: Callable[[Scope], bool]
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.counts_itself = counts_itself

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http" or self.counts_itself(scope):
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
