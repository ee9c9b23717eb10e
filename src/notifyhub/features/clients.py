"""Builders for the connections: the PostgreSQL engine and the two Redis clients."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.settings import DatabaseSettings, Settings
from notifyhub.store.client import check_durability, create_redis
from notifyhub.store.client import close as close_redis
from notifyhub.store.keys import Keys
from notifyhub.tracing import Tracing


@dataclass(frozen=True, slots=True)
class Database:
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]


@dataclass(frozen=True, slots=True)
class RedisClients:
    redis: Redis
    """Requests' client: every command bounded by `redis_timeout_s`."""
    bulk: Redis
    """Fan-out and stream-read pipelines: one timer per pipeline, not one per reply."""
    keys: Keys


def _required(url: str | None, name: str) -> str:
    if url is None:
        raise ValueError(f"the hub needs {name} (the CLI starts embedded servers)")
    return url


def engine(
    stack: AsyncExitStack,
    settings: Settings,
    *,
    bounds: DatabaseSettings | None = None,
    relaxed_commits: bool = False,
    pool_size: int = 20,
) -> AsyncEngine:
    """An engine whose connects, statements and pool waits are bounded (`bounds`, else
    the settings'); disposed when the stack closes."""
    bounds = bounds or settings.database
    made = create_engine(
        _required(settings.database_url, "database_url"),
        relaxed_commits=relaxed_commits,
        pool_size=pool_size,
        connect_timeout_s=bounds.connect_timeout_s,
        statement_timeout_s=bounds.statement_timeout_s,
        pool_timeout_s=bounds.pool_timeout_s,
    )
    stack.push_async_callback(made.dispose)
    return made


def database(
    stack: AsyncExitStack, settings: Settings, *, bounds: DatabaseSettings | None = None
) -> Database:
    """The engine requests and loops share, and its sessionmaker."""
    made = engine(stack, settings, bounds=bounds)
    return Database(made, create_sessionmaker(made))


def _redis(stack: AsyncExitStack, settings: Settings, socket_timeout_s: float | None) -> Redis:
    client = create_redis(
        _required(settings.redis_url, "redis_url"),
        pool_size=settings.redis_pool_size,
        pool_timeout_s=settings.redis_pool_timeout_s,
        socket_timeout_s=socket_timeout_s,
    )
    stack.push_async_callback(close_redis, client)
    return client


async def redis_clients(
    stack: AsyncExitStack, settings: Settings, tracing: Tracing | None = None
) -> RedisClients:
    """Both clients (the request client closes first), their commands traced when tracing
    is on; warns of risky persistence."""
    bulk = _redis(stack, settings, None)
    redis = _redis(stack, settings, settings.redis_timeout_s)
    if tracing is not None and tracing.enabled:
        from notifyhub.otel import SpanTracing

        assert isinstance(tracing, SpanTracing)
        tracing.instrument_redis(bulk)
        tracing.instrument_redis(redis)
    await check_durability(redis)
    keys = Keys(settings.redis_prefix, pubsub_shards=settings.redis_pubsub_shards)
    return RedisClients(redis, bulk, keys)
