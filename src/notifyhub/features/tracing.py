"""Builders for tracing: the app's `Tracing` (create_app) and its start (the lifespan)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from notifyhub.settings import Settings
from notifyhub.tracing import Tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter


def tracing(settings: Settings, exporter: SpanExporter | None = None) -> Tracing:
    """Off (`Tracing()`, nothing imported) unless `traces_exporter` (OTEL_TRACES_EXPORTER)
    names an exporter or `exporter` is given (tests: an in-memory one). Made with the
    app: FastAPI's instrumentation must wrap its middleware before the lifespan runs."""
    if exporter is None and settings.traces_exporter == "none":
        return Tracing()
    from notifyhub import otel  # the `otel` extra: imported only when tracing is on

    exporters = [exporter] if exporter is not None else otel.exporters(settings.traces_exporter)
    return otel.SpanTracing(exporters)


def start_tracing(stack: AsyncExitStack, tracing: Tracing) -> None:
    """Export from now on and trace asyncpg's queries; built first, so spans are flushed
    after everything traced has stopped. (Redis clients are traced where they are made.)"""
    if not tracing.enabled:
        return
    from notifyhub.otel import SpanTracing

    assert isinstance(tracing, SpanTracing)
    tracing.start()
    stack.callback(tracing.shutdown)
    tracing.instrument_asyncpg()
    stack.callback(tracing.uninstrument_asyncpg)
