"""The test run's one PostgreSQL database: emptying tables a suite leaves behind."""

from __future__ import annotations

from sqlalchemy import text

from notifyhub.db.engine import create_engine


async def truncate(database_url: str, *tables: str) -> None:
    """Empty `tables` (what one module made that later tests would see)."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(f"TRUNCATE {', '.join(tables)}"))
    finally:
        await engine.dispose()
