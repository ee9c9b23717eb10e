"""Alembic environment: async engine; the URL comes from the caller (db/migrate.py)."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from notifyhub.db import models  # noqa: F401  (registers the tables)
from notifyhub.db.base import Base
from notifyhub.db.migrate import migration_lock

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    with migration_lock(connection):  # several processes starting at once take turns
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()


async def _online(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


def main() -> None:
    url = context.config.attributes.get("database_url") or context.config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise RuntimeError("no database URL given to Alembic")
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    asyncio.run(_online(url))


main()
