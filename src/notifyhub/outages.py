"""Which backing store an exception says is unavailable (Redis, PostgreSQL, or neither).

One classification for the API's 503s (api/errors.py) and for the parts that degrade
instead of failing (the API key cache serves known keys through a PostgreSQL outage;
the rate limiter admits while Redis is down).

Outages are: refused or lost connections (uvloop's refusal to write to a connection its
peer reset included), connect and command timeouts, pool checkout timeouts, a server
shutting down or refusing new clients, and PostgreSQL's statement timeout. A failed
constraint or a syntax error is a bug or a conflict, never an outage.

PostgreSQL's errors are told apart by SQLSTATE, never by message text: the classes that
mean "not now" (`NOT_NOW_CLASSES`: connection exceptions, insufficient resources such as
too many connections, operator intervention such as an admin shutdown or a server that
cannot accept connections yet, and the statement timeout) and a serialization failure
or deadlock (`NOT_NOW_STATES`: the transaction was rolled back, a retry may pass). A
connect the server refuses for any reason (a database set to `ALLOW_CONNECTIONS false`
answers 55000) is marked a disconnect by the engine (db/engine.py), so it is an outage too.
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
NOT_NOW_CLASSES = frozenset({"08", "53", "57"})
"""SQLSTATE classes of a PostgreSQL that cannot serve us now: 08 connection exception,
53 insufficient resources (53300 too many connections), 57 operator intervention (57014
statement timeout, 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now,
57P04 database dropped)."""
NOT_NOW_STATES = frozenset({"40001", "40P01"})
"""Serialization failure and deadlock: the transaction was rolled back; a retry may pass."""
POSTGRES_OUTAGES: tuple[type[Exception], ...] = (
    # asyncpg's classes for the SQLSTATEs above (each class's errors subclass its base)
    asyncpg.exceptions.PostgresConnectionError,  # 08
    asyncpg.exceptions.InsufficientResourcesError,  # 53
    asyncpg.exceptions.OperatorInterventionError,  # 57
    asyncpg.exceptions.SerializationError,  # 40001
    asyncpg.exceptions.DeadlockDetectedError,  # 40P01
    PoolTimeoutError,  # SQLAlchemy's pool: no connection free within pool_timeout
)
_DRIVERS: dict[str, Dependency] = {
    "redis": "redis",
    "asyncpg": "postgres",
    "sqlalchemy": "postgres",
}


def outage_of(exc: BaseException) -> Dependency | None:
    """The store `exc` says is unavailable, or None when it is not an outage."""
    if isinstance(exc, REDIS_OUTAGES) or _closed_under_redis(exc) or _unmapped_slot(exc):
        return "redis"
    if isinstance(exc, POSTGRES_OUTAGES) or _not_now(exc):
        return "postgres"
    if isinstance(exc, DBAPIError):
        return "postgres" if _is_connection_failure(exc) else None
    if isinstance(exc, OSError):  # TimeoutError too: asyncpg's connect and command timeouts
        return _raised_by(exc)
    return None


def _closed_under_redis(exc: BaseException) -> bool:
    """A command written to a Redis connection that the event loop had already closed,
    its peer having reset it (a master killed under load, a proxy dropping idle
    connections): uvloop refuses the write with a RuntimeError ("... the handler is
    closed") where asyncio's own loop raises an OSError, the one redis-py turns into a
    ConnectionError (it drops the connection either way)."""
    return isinstance(exc, RuntimeError) and "closed" in str(exc) and _raised_by(exc) == "redis"


CLUSTER_CLIENTS = frozenset({"redis.asyncio.cluster", "redis.cluster"})
"""redis-py's Redis Cluster clients (their modules)."""


def _unmapped_slot(exc: BaseException) -> bool:
    """A Redis Cluster client whose map of slots to nodes was caught mid-change (a
    failover, nodes replaced or resharded): it finds no node for a slot and, instead of
    a ClusterDownError, raises AttributeError on the None it got (redis-py issue 3835,
    open in the versions we pin). For the request it means the same: no node serves
    that slot now. Only an AttributeError raised in the cluster client's own code counts;
    anywhere else it is a bug."""
    if not isinstance(exc, AttributeError):
        return False
    frames = list(traceback.walk_tb(exc.__traceback__))
    return bool(frames) and frames[-1][0].f_globals.get("__name__") in CLUSTER_CLIENTS


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
    return any(isinstance(e, (*POSTGRES_OUTAGES, OSError)) or _not_now(e) for e in _chain(exc))


def _not_now(exc: BaseException) -> bool:
    """Whether the error's SQLSTATE (asyncpg's `sqlstate`, a DBAPI error's `pgcode`) says
    PostgreSQL cannot serve us now, rather than that the request or our SQL is wrong."""
    state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    if not isinstance(state, str):
        return False
    return state[:2] in NOT_NOW_CLASSES or state in NOT_NOW_STATES


_LAYERS: dict[str, Dependency] = {"notifyhub.store": "redis", "notifyhub.db": "postgres"}
"""Our own code over each store: a wait there is a wait on it (a request sharing another's
rate-limit ask waits on a future of the store layer, not in the driver)."""


def waited_on(exc: TimeoutError) -> Dependency | None:
    """The store a request was waiting on when its deadline (`asyncio.timeout`) ran out:
    the innermost frame of a driver or of our layer over it where the cancellation struck
    (`exc` is raised from it)."""
    cancelled = exc.__cause__ or exc.__context__
    found = None
    for frame, _ in traceback.walk_tb(cancelled.__traceback__ if cancelled else None):
        module = str(frame.f_globals.get("__name__", ""))
        layer = ".".join(module.split(".", 2)[:2])
        found = _DRIVERS.get(module.partition(".")[0]) or _LAYERS.get(layer) or found
    return found


def _raised_by(exc: BaseException) -> Dependency | None:
    """Which store's driver raised a raw socket error (the innermost driver frame wins):
    asyncpg's connect and command timeouts reach us unwrapped by SQLAlchemy."""
    found = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        package = str(frame.f_globals.get("__name__", "")).partition(".")[0]
        found = _DRIVERS.get(package, found)
    return found
