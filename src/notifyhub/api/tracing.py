"""FastAPI's maintained instrumentation on the app, when tracing is on.

It wraps the whole middleware stack, `PublishFastPath` included, so a publish served by
the fast path is the same server span (same name, same attributes) as one served by the
route. Event streams enter before that stack (`HubApp.stream_entry`) and are not wrapped:
a server span would last as long as the stream, hours; each write of a traced
notification is a span of its own instead (realtime/sse.py)."""

from __future__ import annotations

from fastapi import FastAPI

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
