"""`notifyhub apikey` against the test database, its output piped (not a terminal)."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys

import pytest

from notifyhub.settings import Settings

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def _cli(settings: Settings, *args: str) -> str:
    assert settings.jwt_secret is not None and settings.database_url is not None
    env = {
        **os.environ,
        "NOTIFYHUB_DATABASE_URL": settings.database_url,
        "NOTIFYHUB_REDIS_URL": settings.redis_url or "",
        "NOTIFYHUB_JWT_SECRET": settings.jwt_secret.get_secret_value(),
    }
    done = subprocess.run(
        [sys.executable, "-m", "notifyhub.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow  # runs the CLI as processes
def test_apikey_list_shows_whole_timestamps(settings: Settings) -> None:
    name = f"cli-list-{secrets.token_hex(3)}-" + "n" * 40
    assert _cli(settings, "apikey", "create", "--name", name, "--scope", "publish").startswith(
        "nh_"
    )
    _cli(settings, "apikey", "revoke", name)
    listed = _cli(settings, "apikey", "list")
    row = next(line for line in listed.splitlines() if name in line)
    assert re.search(rf"{ISO}\s.*{ISO}", row), row  # created and revoked, whole
    assert "…" not in listed
