"""Alembic, run programmatically: `upgrade_head` for the CLI and tests, `is_current` for /readyz."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from notifyhub.db.engine import asyncpg_url

MIGRATIONS = Path(__file__).resolve().parents[3] / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["database_url"] = asyncpg_url(database_url)
    return config


def upgrade_head(database_url: str) -> None:
    """Apply every migration (idempotent). Synchronous: Alembic's env runs its own loop."""
    command.upgrade(alembic_config(database_url), "head")


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("postgresql://")).get_current_head()


async def is_current(engine: AsyncEngine) -> bool:
    def current(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as connection:
        revision = await connection.run_sync(current)
    return revision == head_revision()
