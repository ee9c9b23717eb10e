"""Fault-suite fixtures: our own Valkey, PostgreSQL and hub processes, killable at will.

Never the machine's shared servers: each scenario gets a fresh Valkey (its own port and
directory), a fresh database on a PostgreSQL this session started, and a hub process.
The checker's table is printed at the end of the run; with NOTIFYHUB_RELIABILITY_DOC=1
its rows also replace those of the same scenarios in docs/reliability.md (the others
stay, so a scenario may be run alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.migrate import upgrade_head
from notifyhub.domain.auth import Scope
from notifyhub.services import apikeys
from notifyhub.settings import Settings
from support.faultenv import REPORT, FaultEnv
from support.history import Verdict, replace_table, table
from support.processes import HubProcess, PostgresProcess, RedisProcess, server_directory

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
_databases = itertools.count()


@pytest.fixture(scope="session")
def fault_root() -> Iterator[Path]:
    with server_directory("nh-faults-") as root:
        yield root


@pytest.fixture(scope="session")
def postgres_process(fault_root: Path) -> Iterator[PostgresProcess]:
    server = PostgresProcess(fault_root / "pg")
    server.init()
    server.start()
    yield server
    server.destroy()


async def _database(server: PostgresProcess) -> str:
    name = f"faults_{next(_databases)}_{secrets.token_hex(3)}"
    conn = await asyncpg.connect(server.server_url.replace("+asyncpg", ""))
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    url = server.server_url.rsplit("/", 1)[0] + f"/{name}"
    await asyncio.to_thread(upgrade_head, url)
    return url


async def _keys(database_url: str) -> list[str]:
    """A publish, a consume and an admin key, in that order."""
    engine = create_engine(database_url)
    try:
        async with create_sessionmaker(engine)() as session, session.begin():
            return [
                await apikeys.create_key(session, name=f"faults-{scope}", scope=scope, tenant=None)
                for scope in (Scope.PUBLISH, Scope.CONSUME, Scope.ADMIN)
            ]
    finally:
        await engine.dispose()


def _hub_env(settings: Settings, durability: str) -> dict[str, str]:
    assert settings.jwt_secret is not None
    return {
        "NOTIFYHUB_REDIS_URL": str(settings.redis_url),
        "NOTIFYHUB_DATABASE_URL": str(settings.database_url),
        "NOTIFYHUB_REDIS_PREFIX": settings.redis_prefix,
        "NOTIFYHUB_JWT_SECRET": settings.jwt_secret.get_secret_value(),
        "NOTIFYHUB_WORKERS__EPOCH_CHECK_INTERVAL_S": "0.5",
        "NOTIFYHUB_STREAM__PING_S": "1",
        "NOTIFYHUB_INBOX_DURABILITY": durability,
        # Webhooks go to the suite's receiver on 127.0.0.1; a killed hub's claimed
        # attempts are re-sent after the lease: 3 s here instead of 120 s.
        "NOTIFYHUB_DELIVERIES_ALLOW_PRIVATE_NETWORKS": "true",
        "NOTIFYHUB_DELIVERIES__LEASE_S": "3",
        "NOTIFYHUB_DELIVERIES__MAX_TIMEOUT_S": "2",
    }


@pytest.fixture
def fault_env(
    postgres_process: PostgresProcess, tmp_path: Path
) -> Callable[..., AbstractAsyncContextManager[FaultEnv]]:
    """`async with fault_env(appendonly=...) as env`: Valkey, a database, a hub process
    (`extra_env`: more `NOTIFYHUB_*` variables for the hub)."""

    @contextlib.asynccontextmanager
    async def start(
        *,
        appendonly: bool = True,
        durability: str = "redis",
        extra_env: dict[str, str] | None = None,
    ) -> AsyncIterator[FaultEnv]:
        redis = RedisProcess(tmp_path / "valkey", appendonly=appendonly)
        redis.start()
        database_url = await _database(postgres_process)
        settings = Settings(
            redis_url=redis.url,
            database_url=database_url,
            redis_prefix="nhfault:",
            jwt_secret="faults-" + secrets.token_hex(32),  # type: ignore[arg-type]
            _env_file=None,  # type: ignore[call-arg]
        )
        keys = await _keys(database_url)
        env = {**_hub_env(settings, durability), **(extra_env or {})}
        hub = HubProcess(env, tmp_path / "hub.log")
        try:
            await hub.start()
            yield FaultEnv(redis, postgres_process, hub, settings, *keys)
        finally:
            await hub.stop()
            redis.stop()

    return start


@pytest.fixture(scope="session")
def fault_report() -> list[Verdict]:
    return REPORT


LOSS_NOTE = """\
lost = acknowledged, never arrived. The suite fails on any lost delayed message or
delivery, and on any lost inbox id except where Redis itself loses data. There, in the
default Redis-only inbox mode, Redis is the inbox's only copy: a kill -9 without AOF or
a FLUSHALL loses what it held (with AOF everysec, at most the last ~1 s of writes). The
"lost" in those rows is that documented loss window (docs/reliability.md), not a
failure; NOTIFYHUB_INBOX_DURABILITY=postgres closes it (its "durable inbox" rows show 0
lost for the inbox; a stream may miss live events across the rebuild, the REST listing
has them)."""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not REPORT:
        return
    terminalreporter.section("fault suite: acknowledged ids by outcome")
    terminalreporter.write_line(table(REPORT))
    terminalreporter.write_line("")
    terminalreporter.write_line(LOSS_NOTE)
    if os.environ.get("NOTIFYHUB_RELIABILITY_DOC") == "1":
        note = (
            "Generated by `NOTIFYHUB_RELIABILITY_DOC=1 pytest tests/faults` (do not edit by hand)."
        )
        DOC.write_text(replace_table(DOC.read_text(), REPORT, note))
        terminalreporter.write_line(f"table written to {DOC}")
