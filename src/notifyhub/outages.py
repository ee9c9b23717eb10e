"""Which backing store an exception says is unavailable (Redis, PostgreSQL, or neither).

One classification for the API's 503s (api/errors.py) and for the parts that degrade
instead of failing (the API key cache serves known keys through a PostgreSQL outage;
the rate limiter admits while Redis is down).

Outages are: refused or lost connections, connect and command timeouts, pool checkout
timeouts, a server shutting down or refusing new clients, and PostgreSQL's statement
timeout. A failed constraint or a syntax error is a bug or a conflict, never an outage.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from typing import Literal

import asyncpg
import redis.exceptions as redis_errors
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

Dependency = Literal["redis", "postgres"]
NAMES: dict[Dependency, str] = {"redis": "Redis", "postgres": "PostgreSQL"}
"""How a problem's `detail` names each: "PostgreSQL is unavailable"."""

REDIS_OUTAGES: tuple[type[Exception], ...] = (
    redis_errors.ConnectionError,  # also BusyLoading, MaxConnections, Authentication
    redis_errors.TimeoutError,
    redis_errors.ReadOnlyError,  # a replica during failover
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
    redis_errors.OutOfMemoryError,  # maxmemory reached with noeviction
)
POSTGRES_OUTAGES: tuple[type[Exception], ...] = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.QueryCanceledError,  # statement_timeout (a cancel we did not ask for)
    PoolTimeoutError,  # SQLAlchemy's pool: no connection free within pool_timeout
)
_DRIVERS: dict[str, Dependency] = {
    "redis": "redis",
    "asyncpg": "postgres",
    "sqlalchemy": "postgres",
}


def outage_of(exc: BaseException) -> Dependency | None:
    """The store `exc` says is unavailable, or None when it is not an outage."""
    if isinstance(exc, REDIS_OUTAGES):
        return "redis"
    if isinstance(exc, POSTGRES_OUTAGES):
        return "postgres"
    if isinstance(exc, DBAPIError):
        return "postgres" if _is_connection_failure(exc) else None
    if isinstance(exc, OSError):  # TimeoutError too: asyncpg's connect and command timeouts
        return _raised_by(exc)
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, the DBAPI error it wraps, and their causes (cycle-safe)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        wrapped = orig if isinstance(orig, BaseException) else None
        todo += [wrapped, current.__cause__, current.__context__]


def _is_connection_failure(exc: DBAPIError) -> bool:
    if exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError):
        return True
    return any(isinstance(e, (*POSTGRES_OUTAGES, OSError)) for e in _chain(exc))


def _raised_by(exc: BaseException) -> Dependency | None:
    """Which store's driver raised a raw socket error (the innermost driver frame wins):
    asyncpg's connect and command timeouts reach us unwrapped by SQLAlchemy."""
    found = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        package = str(frame.f_globals.get("__name__", "")).partition(".")[0]
        found = _DRIVERS.get(package, found)
    return found
