"""The `notifyhub` command: light to start, tokens that say how long they last, output
that a log file keeps whole."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import jwt
import pytest
from typer.testing import CliRunner

from notifyhub import cli
from notifyhub.settings import Settings

SECRET = "cli-test-secret-" + "x" * 32


def test_importing_the_cli_loads_no_server_or_store_library() -> None:
    """`notifyhub --help` must not pay for the hub: its libraries load in the commands."""
    heavy = ("fastapi", "sqlalchemy", "redis", "rich", "uvicorn", "notifyhub.settings")
    code = f"import sys, notifyhub.cli; print([m for m in {heavy!r} if m in sys.modules])"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


@pytest.mark.parametrize(
    ("ttl", "seconds", "said"),
    [
        (None, 3600, "valid 1 hour"),
        ("30d", 30 * 86400, "valid 30 days"),
        ("90", 90, "valid 90 seconds"),
    ],
)
def test_token_says_its_lifetime(
    monkeypatch: pytest.MonkeyPatch, ttl: str | None, seconds: int, said: str
) -> None:
    monkeypatch.setenv("NOTIFYHUB_JWT_SECRET", SECRET)
    args = ["token", "--user", "bob"] + (["--ttl", ttl] if ttl else [])
    before = int(time.time())
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    claims = jwt.decode(
        result.stdout.strip(), SECRET, algorithms=["HS256"], options={"verify_aud": False}
    )
    assert claims["sub"] == "bob"
    assert before + seconds <= claims["exp"] <= int(time.time()) + seconds
    assert result.stderr.startswith(said + ", until ")


def test_token_refuses_a_lifetime_it_cannot_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFYHUB_JWT_SECRET", SECRET)
    result = CliRunner().invoke(cli.app, ["token", "--user", "bob", "--ttl", "soon"])
    assert result.exit_code == 2 and "number and s, m, h or d" in result.output


def test_the_banner_keeps_each_line_whole_in_a_log_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Printed to a file (not a terminal), no line is wrapped at 80 columns, and the
    token's lifetime is said."""
    data = tmp_path / ("a-long-directory-name-" * 6) / "data"
    data.mkdir(parents=True)
    for label, _scope, file in cli.DEV_KEYS:
        (data / file).write_text(f"nh_{label}_" + "k" * 43)
    settings = Settings(jwt_secret=SECRET, data_dir=data, _env_file=None)  # type: ignore[arg-type,call-arg]
    cli._dev_credentials(settings, "http://127.0.0.1:8000")()
    lines = capsys.readouterr().out.splitlines()
    assert any(str(data.resolve()) in line for line in lines)
    token_line = next(line for line in lines if "user token" in line)
    assert "(user 'alice', valid 30 days)" in token_line
    assert any("notifyhub token --user U (valid 1 hour" in line for line in lines)
    assert all(line.startswith("  ") or line.startswith("notifyhub") for line in lines)


def test_a_setting_the_hub_refuses_is_a_line_naming_it_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOTIFYHUB_JWT_SECRET", SECRET)
    monkeypatch.setenv("NOTIFYHUB_STREAM__PRESENCE_INTERVAL_S", "soon")
    result = CliRunner().invoke(cli.app, ["token", "--user", "bob"])
    assert result.exit_code == 1, result.output
    assert result.stdout == ""  # stdout carries a token or nothing
    assert "invalid configuration: NOTIFYHUB_STREAM__PRESENCE_INTERVAL_S" in result.stderr
    assert not isinstance(result.exception, ValueError)  # no traceback: an exit


def test_a_jwt_secret_too_short_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFYHUB_JWT_SECRET", "short")
    monkeypatch.setenv("NOTIFYHUB_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:1/x")
    monkeypatch.setenv("NOTIFYHUB_REDIS_URL", "redis://127.0.0.1:1/0")  # (not embedded)
    result = CliRunner().invoke(cli.app, ["token", "--user", "bob"])
    assert result.exit_code == 1
    assert "NOTIFYHUB_JWT_SECRET must be at least 32 characters" in result.stderr


@pytest.mark.parametrize(
    ("args", "store"),
    [
        (["apikey", "list"], "PostgreSQL"),
        (["apikey", "create", "--name", "ops", "--scope", "admin"], "PostgreSQL"),
        (["apikey", "revoke", "ops"], "PostgreSQL"),
        (["migrate"], "PostgreSQL"),
        (["restore"], "PostgreSQL"),
    ],
)
def test_a_store_that_cannot_be_reached_is_a_line_naming_it_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, args: list[str], store: str
) -> None:
    """Nothing listens on port 1: the connection is refused at once."""
    monkeypatch.setenv("NOTIFYHUB_JWT_SECRET", SECRET)
    closed = "postgresql+asyncpg://postgres@127.0.0.1:1/x"
    monkeypatch.setenv("NOTIFYHUB_DATABASE_URL", closed)
    monkeypatch.setenv("NOTIFYHUB_REDIS_URL", "redis://127.0.0.1:1/0")
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 1, result.output
    assert f"could not work with {store}" in result.stderr, result.output
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--user", ""], "user: 1 to 200 printable characters"),
        (["--user", "a\nb"], "user: 1 to 200 printable characters"),
        (["--user", "u" * 201], "user: 1 to 200 printable characters"),
        (["--user", "bob", "--tenant", "acme corp"], "tenant: 1 to 64 of"),
        (["--user", "bob", "--ttl", "99999999999999d"], "too long a lifetime"),  # a traceback
    ],
)
def test_token_refuses_a_token_the_hub_would_refuse(
    monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    """No token is printed that every request would answer 401 (`invalid sub claim`),
    nor one whose expiry is past the year 9999."""
    monkeypatch.setenv("NOTIFYHUB_JWT_SECRET", SECRET)
    result = CliRunner().invoke(cli.app, ["token", *args])
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.stderr.split()) and result.stdout == ""


def test_a_minted_token_is_one_the_hub_takes() -> None:
    from notifyhub.services.tokens import TokenService

    tokens = TokenService(Settings(jwt_secret=SECRET, _env_file=None))  # type: ignore[call-arg]
    principal = tokens.verify_user_token(tokens.mint_user_token("jörg ü/x", "acme.eu-1"))
    assert (principal.user, principal.tenant) == ("jörg ü/x", "acme.eu-1")


def test_producers_check_says_what_is_wrong_with_a_file_it_cannot_read(tmp_path: Path) -> None:
    """A directory, or a file not in UTF-8: a line and a non-zero exit (both tracebacks)."""
    latin1 = tmp_path / "producers.yaml"
    latin1.write_bytes("producers:\n  - name: caf\xe9\n".encode("latin-1"))
    result = CliRunner().invoke(cli.app, ["producers", "check", str(latin1)])
    assert result.exit_code == 1, result.output
    assert "invalid" in result.output and "utf-8" in result.output
    assert not isinstance(result.exception, UnicodeDecodeError)
    result = CliRunner().invoke(cli.app, ["producers", "check", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "Invalid value for 'path'" in result.output  # (the box cuts a long path)
    assert not isinstance(result.exception, IsADirectoryError)


def test_python_dash_m_notifyhub_is_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "notifyhub", "token", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "Mint a development user token" in done.stdout
