"""The test run's PostgreSQL: URLs of other databases on the same server, and emptying
tables a suite leaves behind."""

from __future__ import annotations

from sqlalchemy import text

from notifyhub.db.engine import create_engine


def with_database(url: str, name: str) -> str:
    """`url` (SQLAlchemy or libpq form) naming database `name` on the same server.

    Only the path's last segment changes: the query is kept, and an embedded server's
    URL has its socket directory there (`postgres@/postgres?host=/tmp/.../pg`), so
    cutting the whole URL at its last `/` would cut that directory instead."""
    base, _, query = url.partition("?")
    base = base.rsplit("/", 1)[0] + f"/{name}"
    return f"{base}?{query}" if query else base


def asyncpg_dsn(url: str) -> str:
    """A SQLAlchemy asyncpg URL as asyncpg's own `connect` takes it."""
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def truncate(database_url: str, *tables: str) -> None:
    """Empty `tables` (what one module made that later tests would see)."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(f"TRUNCATE {', '.join(tables)}"))
    finally:
        await engine.dispose()
