"""Facts about the repository itself that tests compare against."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pyproject_version() -> str:
    """`version` in pyproject.toml: the one source of notifyhub's version."""
    version: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return version
