"""The async engine and session factory, built by the composition root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection


def asyncpg_url(url: str) -> str:
    """Accept `postgresql://` and `postgres://` URLs too: notifyhub talks asyncpg."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+asyncpg://" + url[len(plain) :]
    return url


def _refuse_closed(
    dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
) -> None:
    """Hand out no pooled connection whose socket the server has closed.

    A PostgreSQL restart or `pg_terminate_backend` closes the socket, and asyncpg marks
    the connection closed as soon as the event loop sees it: checked here without a round
    trip. `pool_pre_ping` checked the same with three (BEGIN, `;`, ROLLBACK) on every
    checkout. Raising makes the pool drop every connection older than this one (they met
    the same restart) and connect afresh.
    """
    driver = record.driver_connection
    if driver is not None and driver.is_closed():
        raise exc.InvalidatePoolError("the server closed this pooled connection")


def create_engine(url: str, *, relaxed_commits: bool = False, pool_size: int = 10) -> AsyncEngine:
    """The engine; with `relaxed_commits` its connections commit without waiting for the
    WAL flush (`synchronous_commit = off`): only for work whose loss in a PostgreSQL crash
    is harmless, such as the outbox's claims and settlements (lost, it is re-sent)."""
    settings = {"synchronous_commit": "off"} if relaxed_commits else {}
    engine = create_async_engine(
        asyncpg_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=5,
        connect_args={"timeout": 5, "command_timeout": 30, "server_settings": settings},
    )
    event.listen(engine.sync_engine.pool, "checkout", _refuse_closed)
    return engine


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


@asynccontextmanager
async def autocommit(sessionmaker: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session whose statements each commit on their own, for work done in single
    statements (atomic by themselves): no BEGIN and COMMIT round trips around them.

    A statement is committed when `execute` returns (durably, unless the engine was made
    with `relaxed_commits`).
    """
    async with sessionmaker() as session:
        await session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        yield session
