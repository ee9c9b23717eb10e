"""Traces: the `Tracing` the hub's parts are given to open spans with.

Off (the default: `OTEL_TRACES_EXPORTER` unset or `none`) is this class itself, whose
`enabled` is False: callers read that one attribute and do nothing more, so a hot path
makes no span, not even a no-op one, and nothing of OpenTelemetry is imported (it is the
optional `otel` extra). On, `features.tracing` builds `otel.SpanTracing`.

A trace crosses Redis as a W3C `traceparent` (bytes): in a doorbell message
(store/doorbells.py) from the publish to the streams it rings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from opentelemetry.trace import Span

Kind = Literal["internal", "server", "client", "producer", "consumer"]
Attributes = Mapping[str, str | int | float | bool]


class Tracing:
    """Tracing off. Every method but `shutdown` is for callers that checked `enabled`."""

    enabled = False

    def span(
        self,
        name: str,
        attributes: Attributes | None = None,
        *,
        kind: Kind = "internal",
        parent: bytes | None = None,
        links: Sequence[bytes] = (),
    ) -> AbstractContextManager[Span]:
        """The current span for a block: a child of the current one, else of `parent`
        (a traceparent), linked to `links`."""
        raise RuntimeError("tracing is off: check `enabled` first")

    def record(self, name: str, start_ns: int, attributes: Attributes) -> None:
        """A span that began at `start_ns` (`time.time_ns()`) and ends now: for work
        worth a span only once it turned out to do something (a mover pass that moved)."""
        raise RuntimeError("tracing is off: check `enabled` first")

    def traceparent(self) -> bytes | None:
        """The current span's context as a W3C traceparent, None outside any span."""
        raise RuntimeError("tracing is off: check `enabled` first")

    def start(self) -> None:
        """Begin exporting (the lifespan's start); off, nothing."""

    def shutdown(self) -> None:
        """Export what is buffered and stop (the lifespan's end); off, nothing."""
