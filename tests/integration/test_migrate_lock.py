"""Migrations under an advisory lock: hub processes starting together on a fresh database
take turns (db/migrate.py `MIGRATION_LOCK_KEY`), and every one of them starts."""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from notifyhub.db.migrate import MIGRATION_LOCK_KEY, head_revision
from support.database import asyncpg_dsn, with_database

pytestmark = pytest.mark.slow  # starts processes

PROCESSES = 4
MIGRATE = "import sys; from notifyhub.db.migrate import upgrade_head; upgrade_head(sys.argv[1])"


@pytest.fixture
async def fresh_database(backends: Any) -> AsyncIterator[str]:
    """An empty database (no tables, no alembic_version) beside the run's, dropped after."""
    name = f"notifyhub_test_migrate_lock_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(asyncpg_dsn(backends.server_url))
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(backends.server_url, name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _waiting_on_the_lock(connection: asyncpg.Connection) -> int:
    """Backends of this database waiting for an advisory lock (a bigint key is stored as
    classid = high 32 bits, objid = low 32 bits)."""
    count: int = await connection.fetchval(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND classid = $1 AND objid = $2",
        MIGRATION_LOCK_KEY >> 32,
        MIGRATION_LOCK_KEY & 0xFFFFFFFF,
    )
    return count


async def _until_all_wait(connection: asyncpg.Connection, processes: int) -> None:
    async with asyncio.timeout(60):
        while await _waiting_on_the_lock(connection) < processes:
            await asyncio.sleep(0.05)  # polling PostgreSQL's lock table, not a timed wait


async def _migrate(url: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        MIGRATE,
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def test_processes_migrating_one_fresh_database_at_once_all_succeed(
    fresh_database: str,
) -> None:
    holder = await asyncpg.connect(asyncpg_dsn(fresh_database))
    try:
        # Hold the lock until every process waits on it, then let them all go at once.
        await holder.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
        processes = [await _migrate(fresh_database) for _ in range(PROCESSES)]
        await _until_all_wait(holder, PROCESSES)
        await holder.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
        async with asyncio.timeout(90):
            outputs = [(await process.communicate())[0] for process in processes]
        codes = [process.returncode for process in processes]
        assert codes == [0] * PROCESSES, b"\n".join(outputs).decode()[-4000:]
        revisions = await holder.fetch("SELECT version_num FROM alembic_version")
        assert [row["version_num"] for row in revisions] == [head_revision()]
        assert await holder.fetchval("SELECT to_regclass('api_keys') IS NOT NULL")
        assert await _waiting_on_the_lock(holder) == 0
    finally:
        await holder.close()
