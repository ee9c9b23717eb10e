"""The optional programs some tests need: `make test` names the missing ones once, at its
start, with how to install them, and folds their skips into one line each."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Part:
    """One optional program, the tests that skip without it, and how to get it."""

    name: str
    tests: str  # what skips without it
    install: str
    mentions: re.Pattern[str]  # how the skips it causes word their reasons

    @property
    def present(self) -> bool:
        if self.name == "Chromium":
            return os.path.exists(os.environ.get("NOTIFYHUB_TEST_CHROMIUM", "/usr/bin/chromium"))
        if self.name == "MkDocs":
            return importlib.util.find_spec("mkdocs") is not None
        return all(shutil.which(program) for program in self.name.split(" and "))


PARTS = (
    Part(
        "Chromium",
        "the browser tests (tests/e2e)",
        "apt-get install chromium",
        re.compile(r"Chromium"),
    ),
    Part(
        "promtool",
        "the alert rules' checks (deploy/prometheus)",
        "apt-get install prometheus",
        re.compile(r"promtool"),
    ),
    Part(
        "npm",
        "the TypeScript and React tests (clients/react)",
        "apt-get install npm",
        re.compile(r"\bnpm\b"),
    ),
    Part(
        "curl and jq",
        "the docs' examples (tests/readme)",
        "apt-get install curl jq",
        re.compile(r"^needs (curl|jq)$"),
    ),
    Part(
        "redis-server",
        "the Redis hygiene checks",
        "apt-get install redis-server",
        re.compile(r"redis-server"),
    ),
    Part(
        "MkDocs",
        "the docs site's build",
        "pip install -e '.[docs]'",
        re.compile(r"docs extra"),
    ),
)
HERE = str(Path(__file__))


def header() -> list[str]:
    """The lines `make test` starts with: what it will skip here, and how to install it."""
    missing = [part for part in PARTS if not part.present]
    if not missing:
        return ["optional parts: all here (" + ", ".join(p.name for p in PARTS) + ")"]
    lines = ["optional parts missing here (Debian packages; Playwright's own browser download"]
    lines += ["is not used): their tests will skip, summed up in one line each at the end"]
    lines += [f"  {p.name}: {p.tests} skip; to run them: {p.install}" for p in missing]
    return lines


def fold(report: pytest.TestReport) -> None:
    """A skip for a missing part reads, in `-ra`'s summary, as one line for all its tests."""
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return
    reason = report.longrepr[2].removeprefix("Skipped: ")
    for part in PARTS:
        if not part.present and part.mentions.search(reason):
            report.longrepr = (HERE, None, f"no {part.name}: {part.tests}; {part.install}")
            return
