"""The async engine and session factory, built by the composition root."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)


def asyncpg_url(url: str) -> str:
    """Accept `postgresql://` and `postgres://` URLs too: notifyhub talks asyncpg."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+asyncpg://" + url[len(plain) :]
    return url


def create_engine(url: str) -> AsyncEngine:
    return create_async_engine(
        asyncpg_url(url),
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=10,
        pool_timeout=5,
        connect_args={"timeout": 5, "command_timeout": 30},
    )


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
