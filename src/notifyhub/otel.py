"""Tracing on: OpenTelemetry's SDK behind `Tracing` (imported only when tracing is on).

Each app has a tracer provider of its own, never the global one, so two hubs in one
process (tests) do not share spans; the instrumentations are given it explicitly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import entry_points

from opentelemetry import trace
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from redis.asyncio import Redis

from notifyhub import __version__
from notifyhub.tracing import Attributes, Kind, Tracing

_KINDS = {
    "internal": trace.SpanKind.INTERNAL,
    "server": trace.SpanKind.SERVER,
    "client": trace.SpanKind.CLIENT,
    "producer": trace.SpanKind.PRODUCER,
    "consumer": trace.SpanKind.CONSUMER,
}
_PROPAGATOR = TraceContextTextMapPropagator()
_ALIASES = {"otlp": "otlp_proto_http"}
"""`otlp` is the gRPC exporter's name; the `otel` extra ships the HTTP one."""


def exporters(names: str) -> list[SpanExporter]:
    """The exporters `OTEL_TRACES_EXPORTER` names (comma-separated), as the SDK finds
    them: by their `opentelemetry_traces_exporter` entry points. Each reads its own
    `OTEL_EXPORTER_*` settings."""
    found = []
    installed = entry_points(group="opentelemetry_traces_exporter")
    for name in (n.strip() for n in names.split(",") if n.strip() not in ("", "none")):
        matches = installed.select(name=name) or installed.select(name=_ALIASES.get(name, name))
        if not matches:
            raise ValueError(f"OTEL_TRACES_EXPORTER: no span exporter {name!r} is installed")
        found.append(next(iter(matches)).load()())
    return found


def resource() -> Resource:
    """The SDK's resource from `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`; the
    service is `notifyhub` unless they name it."""
    detected = Resource.create()
    if str(detected.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        detected = detected.merge(Resource({SERVICE_NAME: "notifyhub"}))
    return detected


def _context(traceparent: bytes) -> trace.SpanContext | None:
    carried = _PROPAGATOR.extract({"traceparent": traceparent.decode(errors="replace")})
    span_context = trace.get_current_span(carried).get_span_context()
    return span_context if span_context.is_valid else None


class SpanTracing(Tracing):
    """Tracing on: spans of this app's provider, exported through `exporters` once
    `start` runs (the lifespan), flushed by `shutdown`."""

    enabled = True

    def __init__(self, exporters: Sequence[SpanExporter]) -> None:
        # The SDK's own exit hook would shut the provider down a second time.
        self.provider = TracerProvider(resource=resource(), shutdown_on_exit=False)
        self._exporters = exporters
        self._processors: list[BatchSpanProcessor] = []
        self._tracer = self.provider.get_tracer("notifyhub", __version__)

    @contextmanager
    def span(
        self,
        name: str,
        attributes: Attributes | None = None,
        *,
        kind: Kind = "internal",
        parent: bytes | None = None,
        links: Sequence[bytes] = (),
    ) -> Iterator[trace.Span]:
        context = None
        if parent is not None and (parent_context := _context(parent)) is not None:
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent_context))
        linked = [trace.Link(c) for link in links if (c := _context(link)) is not None]
        with self._tracer.start_as_current_span(
            name, context, _KINDS[kind], attributes, linked
        ) as span:
            yield span

    def record(self, name: str, start_ns: int, attributes: Attributes) -> None:
        self._tracer.start_span(name, attributes=attributes, start_time=start_ns).end()

    def traceparent(self) -> bytes | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        found = carrier.get("traceparent")
        return None if found is None else found.encode()

    def start(self) -> None:
        for exporter in self._exporters:
            processor = BatchSpanProcessor(exporter)
            self.provider.add_span_processor(processor)
            self._processors.append(processor)

    def shutdown(self) -> None:
        """Flush and stop this lifespan's processors (a next lifespan adds its own)."""
        for processor in self._processors:
            processor.shutdown()  # type: ignore[no-untyped-call]
        self._processors.clear()

    def instrument_redis(self, client: Redis) -> None:
        """Commands and pipelines of `client` become spans (the place script among them)."""
        RedisInstrumentor.instrument_client(client, tracer_provider=self.provider)

    def instrument_asyncpg(self) -> None:
        """asyncpg's queries become spans: a patch of its classes, process-wide (the
        maintained instrumentation has no per-connection form); `uninstrument_asyncpg`
        removes it."""
        AsyncPGInstrumentor().instrument(tracer_provider=self.provider)  # type: ignore[no-untyped-call]

    def uninstrument_asyncpg(self) -> None:
        AsyncPGInstrumentor().uninstrument()  # type: ignore[no-untyped-call]
