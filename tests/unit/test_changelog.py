"""CHANGELOG.md keeps Keep a Changelog's shape, names the version pyproject.toml is at,
and its metric rename table matches what the hub exports."""

from __future__ import annotations

import re
from pathlib import Path

from notifyhub.delivery_metrics import DeliveryMetrics
from notifyhub.metrics import Metrics
from support.project import pyproject_version

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
SEMVER = r"(\d+)\.(\d+)\.(\d+)"
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def releases() -> list[str]:
    return re.findall(r"^## \[(.+?)\]", CHANGELOG, re.M)


def section(name: str) -> str:
    start = CHANGELOG.index(f"## [{name}]")
    end = CHANGELOG.find("\n## [", start + 1)
    return CHANGELOG[start : end if end != -1 else None]


def test_versions_are_semantic_dated_and_newest_first() -> None:
    assert releases()[0] == "Unreleased"
    dated = re.findall(rf"^## \[{SEMVER}\] - \d{{4}}-\d{{2}}-\d{{2}}$", CHANGELOG, re.M)
    assert len(dated) == len(releases()) - 1, "every release but Unreleased is dated"
    versions = [tuple(map(int, v)) for v in dated]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)


def test_subsections_are_keep_a_changelog_kinds() -> None:
    assert set(re.findall(r"^### (.+)$", CHANGELOG, re.M)) <= KINDS


def test_pyproject_version_is_released_or_the_next_release() -> None:
    version = pyproject_version()
    assert version in releases() or f"released as {version}" in section("Unreleased")


def exported_families() -> set[str]:
    metrics = Metrics()
    DeliveryMetrics(metrics.registry)
    body = metrics.render()[0].decode()
    typed = {line.split()[2] for line in body.splitlines() if line.startswith("# TYPE ")}
    return {name for name in typed if not name.endswith("_created")}


def test_the_metric_rename_table_covers_every_exported_metric() -> None:
    """Every metric is renamed in the table, or new in this release (named under Added)."""
    unreleased = section("Unreleased")
    rows = re.findall(r"^  \| `([a-z_]+)` \| `([a-z_]+)` \|$", unreleased, re.M)
    assert rows, "the rename table under Removed"
    assert all(new == f"notifyhub_{old}" for old, new in rows)
    renamed = {new for _, new in rows}
    added = unreleased.split("### Added", 1)[1].split("\n### ", 1)[0]
    new_metrics = {name for name in exported_families() - renamed if f"`{name}`" in added}
    assert renamed <= exported_families()
    assert renamed | new_metrics == exported_families(), "name a new metric under Added"
