"""OpenTelemetry traces (notifyhub/tracing.py): one trace from a publish to the stream
write that sends it; with tracing off, nothing of OpenTelemetry is installed."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import asyncpg
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from test_stream import no_streams_left, open_stream, send

from notifyhub.api.app import create_app
from notifyhub.settings import Settings


def _named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


@pytest.mark.parametrize("hot", [True, False], ids=["hot-entry", "route"])
async def test_one_trace_from_post_to_stream_write(
    settings: Settings, start_hub: Any, publish_key: str, make_token: Any, hot: bool
) -> None:
    exporter = InMemorySpanExporter()
    app = create_app(settings, span_exporter=exporter)
    if not hot:  # the FastAPI routes answer (tests/integration/test_route_parity.py)
        assert app.hot is not None
        app.hot.routes.clear()
    async with start_hub(settings, app) as hub:
        async with open_stream(hub, make_token("otto")) as stream:
            await stream.next()  # counts: the stream is attached
            sent = await send(hub, publish_key, ["otto"], title="traced")
            event, _ = await stream.until("notification")
            assert event.data["id"] == sent
        await no_streams_left(hub)
    spans = list(exporter.get_finished_spans())  # the lifespan's end flushed them

    (post,) = _named(spans, "POST /v1/notifications")  # the hot entry's is the route's
    assert post.kind is SpanKind.SERVER
    assert post.attributes is not None and post.attributes["http.route"] == "/v1/notifications"
    assert post.context is not None
    trace_id = post.context.trace_id
    (publish,) = _named(spans, "notifyhub.publish")
    assert (
        publish.attributes is not None and publish.attributes["notifyhub.notification.id"] == sent
    )
    (doorbell,) = _named(spans, "notifyhub.doorbell")
    writes = _named(spans, "notifyhub.stream.write")
    assert len(writes) == 1
    for span in (publish, doorbell, *writes):
        assert span.context is not None and span.context.trace_id == trace_id, span.name
    assert doorbell.parent is not None and publish.context is not None
    assert doorbell.parent.span_id == publish.context.span_id
    children = [s for s in spans if s.parent and s.parent.span_id == publish.context.span_id]
    # The place script's pipeline, as the redis instrumentation names it.
    assert [s for s in children if s.kind is SpanKind.CLIENT and "EVALSHA" in s.name]
    assert doorbell.context is not None and writes[0].parent is not None
    assert writes[0].parent.span_id == doorbell.context.span_id


async def test_off_installs_nothing(settings: Settings, start_hub: Any) -> None:
    assert settings.traces_exporter == "none"
    app = create_app(settings)
    assert not hasattr(app, "_original_build_middleware_stack")  # FastAPI's instrumentation
    async with start_hub(settings, app) as hub:
        state = hub.app_state
        assert not state["hub"].tracing.enabled
        assert not getattr(state["redis"], "_is_instrumented_by_opentelemetry", False)
        assert not hasattr(asyncpg.connection.Connection.execute, "__wrapped__")
        response = await hub.client.get("/healthz")
        assert "traceparent" not in response.headers


@pytest.mark.slow  # starts a fresh interpreter
def test_off_imports_no_opentelemetry() -> None:
    """Off, the `otel` extra is not even imported: a hub without it installed runs.
    (redis-py imports OpenTelemetry's API on its own when it is installed.)"""
    code = (
        "import sys\n"
        "from notifyhub.api.app import create_app\n"
        "from notifyhub.settings import Settings\n"
        "create_app(Settings(redis_url='redis://x', database_url='postgresql+asyncpg://x',"
        " dev_mode=True, _env_file=None))\n"
        "assert 'notifyhub.otel' not in sys.modules\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry.instrumentation')]\n"
    )
    env = {"PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
