"""One version: pyproject.toml's, read from the installed metadata, shown by the OpenAPI
document (and `/healthz`, tests/integration/test_inbox_api.py)."""

from __future__ import annotations

import re

import notifyhub
from notifyhub.api.app import create_app
from notifyhub.settings import Settings
from support.project import ROOT, pyproject_version


def test_the_version_is_semantic_and_installed_from_pyproject() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", pyproject_version())
    assert notifyhub.__version__ == pyproject_version(), "reinstall: make venv"


def test_the_openapi_document_shows_it() -> None:
    offline = Settings(
        redis_url="redis://unused",
        database_url="postgresql+asyncpg://unused/unused",
        jwt_secret="x" * 32,  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
    )
    assert create_app(offline).openapi()["info"]["version"] == pyproject_version()


def test_docs_show_the_current_version() -> None:
    """Where docs spell the version out (a /healthz answer, an image tag), it is this one."""
    shown = {
        version
        for doc in ("README.md", "docs/operations.md", "deploy/k8s/README.md")
        for version in re.findall(
            r'(?:"version": "|notifyhub:)(\d+\.\d+\.\d+)', (ROOT / doc).read_text()
        )
    }
    assert shown == {pyproject_version()}
