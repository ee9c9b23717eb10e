"""Every metric the hub exports carries the one application prefix, `notifyhub_`
(Prometheus naming: names from many exporters share one server), and every metric the
dashboard and the alert rules in deploy/ query is one the hub exports."""

from __future__ import annotations

import re
from typing import Any

import pytest

from integration.test_stream import no_streams_left, open_stream, send
from notifyhub.settings import DeliverySettings, Settings
from support.deliveries import define, post, unique
from unit.test_deploy_observability import dashboard_exprs, metric_names, rule_exprs

ALLOWED = re.compile(r"^(notifyhub_|python_|process_)")
"""The acceptance check: `curl /metrics | grep -v '^#' | grep -vE '^(notifyhub_|...)'`."""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    deliveries = DeliverySettings(allow_networks=["127.0.0.1/32"], dispatcher_interval_s=3600)
    return settings.model_copy(update={"deliveries": deliveries})


async def traffic(hub: Any, publish_key: str, admin_key: str, make_token: Any) -> None:
    """A publish seen on a live stream, a delivery definition and a delivery: enough for
    every family with labels to have samples."""
    async with open_stream(hub, make_token("metric-names")) as stream:
        await send(hub, publish_key, ["metric-names"], title="counted")
        await stream.until("notification")
    await no_streams_left(hub)
    name = unique("metric-names")
    await define(hub.client, admin_key, name, url="http://127.0.0.1:9/hook")
    await post(hub.client, publish_key, name, {"n": 1})
    await hub.app_state["dispatcher"].housekeeping()


async def test_every_sample_is_prefixed(
    hub: Any, publish_key: str, admin_key: str, make_token: Any
) -> None:
    await traffic(hub, publish_key, admin_key, make_token)
    text = (await hub.client.get("/metrics")).text
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert [line for line in samples if not ALLOWED.match(line)] == []
    families = {m.name for m in hub.app_state["metrics"].registry.collect()}
    assert {f for f in families if not f.startswith("notifyhub_")} == set()
    names = {line.split("{")[0].split(" ")[0] for line in samples}
    for sampled in (
        "notifyhub_streams_open",
        "notifyhub_stream_events_sent_total",
        "notifyhub_streams_dropped_total",
        "notifyhub_notifications_ingested_total",
        "notifyhub_http_requests_total",
        "notifyhub_deliveries",
        "notifyhub_loop_last_success_timestamp_seconds",
    ):
        assert sampled in names, sampled


def exported(text: str) -> set[str]:
    """Family names (`# TYPE` lines, so families with no sample yet count) and sample names."""
    typed = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    sampled = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
    return typed | (sampled - {""})


async def test_the_dashboard_and_the_alerts_query_exported_metrics(
    hub: Any, publish_key: str, admin_key: str, make_token: Any
) -> None:
    await traffic(hub, publish_key, admin_key, make_token)
    names = exported((await hub.client.get("/metrics")).text)
    assert metric_names(dashboard_exprs()) - names == set()
    assert metric_names(rule_exprs()) - names == set()
    assert metric_names(["notifyhub_renamed_away_total"]) - names  # the check can fail
