"""deploy/prometheus/alerts.yml and deploy/grafana/notifyhub.json, read without a
Prometheus or a Grafana: rules checked and unit-tested by `promtool` where it is
installed (Debian's `prometheus` package; .ci/run installs it), their structure always.
That every metric they name exists is tests/integration/test_metric_names.py's check."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "notifyhub.json"
METRIC = re.compile(r"notifyhub_[a-z0-9_]+")
DURATION = re.compile(r"\d+[smhd]")
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$job": ".*"}

promtool = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    promtool is None, reason="promtool not on PATH (Debian: apt-get install prometheus)"
)


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def dashboard_exprs() -> list[str]:
    return [target["expr"] for panel in panels() for target in panel["targets"]]


def metric_names(exprs: list[str]) -> set[str]:
    """The notifyhub_ metric families named in PromQL, histogram suffixes stripped."""
    names = {name for expr in exprs for name in METRIC.findall(expr)}
    return {re.sub(r"_(bucket|sum|count)$", "", name) for name in names}


def rule_exprs() -> list[str]:
    return [rule["expr"] for rule in rules()]


def promtool_run(*args: str, cwd: Path) -> None:
    assert promtool is not None
    done = subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_is_an_alert_with_severity_and_text() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    assert [g["name"] for g in groups] == ["notifyhub"]
    names = [rule["alert"] for rule in rules()]
    assert len(names) == len(set(names)) and all(n.startswith("Notifyhub") for n in names)
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description"} <= set(rule["annotations"])
        assert DURATION.fullmatch(rule.get("for", "0s")), rule["alert"]
        assert METRIC.search(rule["expr"]), rule["alert"]


def test_the_rules_cover_what_operators_page_on() -> None:
    watched = metric_names(rule_exprs())
    assert {
        "notifyhub_delivery_attempts_settled_total",  # final failures
        "notifyhub_deliveries",  # backlog
        "notifyhub_delayed_oldest_due_age_seconds",
        "notifyhub_loop_last_success_timestamp_seconds",
        "notifyhub_http_unavailable_total",
        "notifyhub_redis_data_loss_total",
        "notifyhub_streams_reset_total",
    } <= watched


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    promtool_run("check", "rules", RULES.name, cwd=RULES.parent)


@needs_promtool
def test_the_alerts_fire_on_their_series() -> None:
    """alerts.test.yml: series in, alerts (labels and rendered text) out."""
    promtool_run("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)


def test_the_dashboard_is_one_grafana_dashboard_on_a_chosen_datasource() -> None:
    board = dashboard()
    assert board["uid"] == "notifyhub" and board["title"] == "notifyhub"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["title"] and panel["targets"], panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert 'job=~"$job"' in target["expr"], panel["title"]


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    shown = metric_names(dashboard_exprs())
    assert {
        "notifyhub_streams_open",
        "notifyhub_notifications_ingested_total",
        "notifyhub_http_request_duration_seconds",  # publish (fan-out) latency
        "notifyhub_deliveries",
        "notifyhub_delivery_attempts_settled_total",
        "notifyhub_delayed_backlog",
        "notifyhub_delayed_oldest_due_age_seconds",
        "notifyhub_http_unavailable_total",
        "notifyhub_streams_dropped_total",
    } <= shown


@needs_promtool
def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    """promtool parses each panel query, as a recording rule (Grafana's variables given
    values first)."""
    records = []
    for i, expr in enumerate(dashboard_exprs()):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        records.append({"record": f"notifyhub:dashboard_query_{i}", "expr": expr})
    rules_file = tmp_path / "dashboard.rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    promtool_run("check", "rules", rules_file.name, cwd=tmp_path)
