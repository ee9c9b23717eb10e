"""Alembic, run programmatically: `upgrade_head` for the CLI and tests, `is_current` for /readyz."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

from notifyhub.db.engine import asyncpg_url

PACKAGED = Path(__file__).resolve().parents[1] / "_migrations"
"""Where a wheel carries the scripts (pyproject's force-include of `migrations/`)."""
SOURCE_TREE = Path(__file__).resolve().parents[3] / "migrations"
"""A clone's own `migrations/` (editable installs: new scripts apply without a reinstall)."""
MIGRATION_LOCK_KEY = 0x6E68_6D69_6772
"""The PostgreSQL advisory lock key (ASCII "nhmigr") held while migrations run: of the
pods that start together, one migrates and the others wait, then find the schema at head.
Advisory locks are per database, so hubs of other databases on the server never wait."""


def migrations_dir() -> Path:
    return PACKAGED if PACKAGED.is_dir() else SOURCE_TREE


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["database_url"] = asyncpg_url(database_url)
    return config


def upgrade_head(database_url: str) -> None:
    """Apply every migration (idempotent; concurrent callers take turns, see
    `migration_lock`). Synchronous: Alembic's env runs its own loop."""
    command.upgrade(alembic_config(database_url), "head")


@contextmanager
def migration_lock(connection: Connection) -> Iterator[None]:
    """Hold `MIGRATION_LOCK_KEY` on `connection` (migrations/env.py, around every online
    run). A session lock, not a transaction's: it outlives the migrations' own commits and
    goes with the connection if the process dies."""
    connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    connection.commit()
    try:
        yield
    finally:
        connection.rollback()  # a failed migration's transaction, if any, ends first
        connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
        connection.commit()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("postgresql://")).get_current_head()


async def is_current(engine: AsyncEngine) -> bool:
    def current(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as connection:
        revision = await connection.run_sync(current)
    return revision == head_revision()
