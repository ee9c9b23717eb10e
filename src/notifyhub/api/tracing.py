"""OpenTelemetry's maintained ASGI instrumentation on the app, when tracing is on.

FastAPI's stack is instrumented as a whole (`FastAPIInstrumentor`), and a publish served
by its hot entry (api/fastpath.py) gets the same server span, by name and `http.route`,
from the same middleware (`trace_route`). Event streams are not wrapped: a server span
would last as long as the stream, hours; each write of a traced notification is a span
of its own instead (realtime/sse.py)."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Scope

from notifyhub.tracing import Tracing

UNTRACED_URLS = "healthz,readyz,metrics"
"""Probes and scrapes: frequent, and not part of any notification's path."""


def install_tracing(app: FastAPI, tracing: Tracing) -> None:
    if not tracing.enabled:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    from notifyhub.otel import SpanTracing

    assert isinstance(tracing, SpanTracing)
    # No span per ASGI message: a stream served by the route sends one per event.
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=tracing.provider,
        excluded_urls=UNTRACED_URLS,
        exclude_spans=["receive", "send"],
    )


def trace_route(app: ASGIApp, tracing: Tracing, method: str, path: str) -> ASGIApp:
    """`app`, serving one route, in a server span named as FastAPI's instrumentation
    names that route's (when tracing is on)."""
    if not tracing.enabled:
        return app
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    from notifyhub.otel import SpanTracing

    assert isinstance(tracing, SpanTracing)

    def details(scope: Scope) -> tuple[str, dict[str, str]]:
        return f"{method} {path}", {"http.route": path}

    return OpenTelemetryMiddleware(
        app,
        default_span_details=details,
        tracer_provider=tracing.provider,
        exclude_spans=["receive", "send"],
    )
