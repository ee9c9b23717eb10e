"""Request metrics as a pure ASGI middleware (labels use the route template, not the path)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notifyhub.metrics import Metrics


class RequestMetrics:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
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
            method = scope["method"]
            self.metrics.http_requests_total.labels(method, route, str(status)).inc()
            self.metrics.http_request_duration_seconds.labels(method, route).observe(
                time.perf_counter() - started
            )
