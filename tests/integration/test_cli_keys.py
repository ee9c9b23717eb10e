"""`notifyhub apikey` against the test database, its output piped (not a terminal),
and the bare connection it works on: the same rules as the hub's, none of the hub loaded."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Sequence

import pytest

from notifyhub.db.driver import connect
from notifyhub.domain.auth import Scope
from notifyhub.errors import Conflict
from notifyhub.services import apikeys
from notifyhub.settings import Settings

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"

HEAVY = ("sqlalchemy", "fastapi", "starlette", "notifyhub.db.models", "notifyhub.features")
"""What the `apikey` commands never import: SQLAlchemy and the models alone took longer
to import than `apikey create` now takes in all (the issue's budget: 1 s)."""


def _run(
    settings: Settings, *args: str, python: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    assert settings.jwt_secret is not None and settings.database_url is not None
    env = {
        **os.environ,
        "NOTIFYHUB_DATABASE_URL": settings.database_url,
        "NOTIFYHUB_REDIS_URL": settings.redis_url or "",
        "NOTIFYHUB_REDIS_PREFIX": settings.redis_prefix,
        "NOTIFYHUB_JWT_SECRET": settings.jwt_secret.get_secret_value(),
    }
    return subprocess.run(
        [sys.executable, *python, "-m", "notifyhub.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _cli(settings: Settings, *args: str) -> str:
    done = _run(settings, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _imported(settings: Settings, *args: str) -> set[str]:
    """The modules the command imported (`-X importtime` names each once, on stderr)."""
    done = _run(settings, *args, python=("-X", "importtime"))
    assert done.returncode == 0, done.stderr
    lines = (line.split("|") for line in done.stderr.splitlines())
    return {cells[2].strip() for cells in lines if len(cells) == 3}


def _heavy(modules: set[str], allowed: tuple[str, ...] = ()) -> list[str]:
    """The modules among `modules` of HEAVY or redis, but for those `allowed`."""
    roots = [root for root in (*HEAVY, "redis") if root not in allowed]
    return sorted(m for m in modules for r in roots if m == r or m.startswith(r + "."))


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


@pytest.mark.slow  # runs the CLI as processes
def test_apikey_commands_load_none_of_the_hub(settings: Settings) -> None:
    """`create` and `list` import neither SQLAlchemy, the models, FastAPI nor redis;
    `revoke` only redis, to tell the running hubs."""
    name = f"cli-lean-{secrets.token_hex(3)}"
    created = _imported(settings, "apikey", "create", "--name", name, "--scope", "consume")
    assert {"notifyhub.services.apikeys", "asyncpg"} <= created  # (the parsing works)
    assert _heavy(created) == []
    assert _heavy(_imported(settings, "apikey", "list")) == []
    revoked = _imported(settings, "apikey", "revoke", name)
    assert "redis" in revoked and _heavy(revoked, allowed=("redis",)) == []


@pytest.mark.slow  # runs the CLI as processes
def test_apikey_create_refuses_a_taken_name_as_the_api_does(settings: Settings) -> None:
    """A taken name is refused in the API's words; the hub-wide keys may still have it."""
    name = f"cli-taken-{secrets.token_hex(3)}"
    create = ("apikey", "create", "--name", name)
    _cli(settings, *create, "--scope", "publish", "--tenant", "acme")
    again = _run(settings, *create, "--scope", "admin", "--tenant", "acme")
    assert again.returncode != 0 and f"tenant acme has an API key named '{name}'" in again.stderr
    assert _cli(settings, *create, "--scope", "admin").startswith("nh_")


async def test_a_bare_connection_keeps_the_hubs_rules(settings: Settings) -> None:
    """The CLI's path (no session, each statement committing on its own): names unique
    per tenant with the API's 409 wording, the hub-wide keys a namespace of their own,
    and a revoke that names the tenant touches only that tenant's key."""
    assert settings.database_url is not None
    name = f"bare-{secrets.token_hex(3)}"
    connection = await connect(settings.database_url)
    try:
        for tenant in ("ta", "tb", None):
            key = await apikeys.create_key(
                connection, name=name, scope=Scope.CONSUME, tenant=tenant
            )
            assert key.startswith("nh_")
        with pytest.raises(Conflict, match=f"^tenant ta has an API key named '{name}'$"):
            await apikeys.create_key(connection, name=name, scope=Scope.ADMIN, tenant="ta")
        with pytest.raises(Conflict, match=f"^the hub-wide keys has an API key named '{name}'$"):
            await apikeys.create_key(connection, name=name, scope=Scope.ADMIN, tenant=None)
        assert await apikeys.revoke_key(connection, name, "ta") is not None
        assert await apikeys.revoke_key(connection, name, "ta") is None  # revoked already
        mine = {k.tenant: k for k in await apikeys.list_keys(connection) if k.name == name}
        assert mine.keys() == {"ta", "tb", None}
        assert [t for t, k in mine.items() if k.revoked_at is not None] == ["ta"]
        assert all(k.scope is Scope.CONSUME for k in mine.values())
    finally:
        await connection.close()


@pytest.mark.slow  # runs the CLI as processes
@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (("--name", ""), "Invalid value for --name"),
        (("--name", "billing worker/2"), "Invalid value for --name"),
        (("--name", "n" * 101), "Invalid value for --name"),  # a traceback (varchar(100))
        (("--name", "{name}", "--tenant", "acme corp"), "Invalid value for --tenant"),
    ],
)
def test_apikey_create_refuses_what_the_api_refuses_and_stores_nothing(
    settings: Settings, args: tuple[str, ...], refused: str
) -> None:
    """A key the API could never name (an empty name, a space or slash, a tenant no
    request can name) is refused before anything is stored, with exit 2 and no traceback."""
    name = f"cli-bad-{secrets.token_hex(3)}"
    args = tuple(a.replace("{name}", name) for a in args)
    done = _run(settings, "apikey", "create", "--scope", "admin", *args)
    assert done.returncode == 2, done.stderr
    assert refused in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
    listed = _cli(settings, "apikey", "list")
    assert name not in listed and "billing worker" not in listed
