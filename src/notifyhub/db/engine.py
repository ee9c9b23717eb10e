"""The async engine and session factory, built by the composition root."""

from __future__ import annotations

import json
from typing import Any

import orjson
from sqlalchemy import event, exc
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from notifyhub.db.driver import connect_options


def asyncpg_url(url: str) -> str:
    """Accept `postgresql://` and `postgres://` URLs too: notifyhub talks asyncpg."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+asyncpg://" + url[len(plain) :]
    return url


def json_text(value: Any) -> str:
    """A JSON/JSONB parameter's text: orjson's (several times faster, docs/scaling.md),
    else the standard module's for what orjson refuses (integers past 64 bits). A NaN or
    an infinity, which PostgreSQL refuses in JSON, is written as null.

    Values read back stay the standard module's: orjson would read an integer past 64
    bits as a float, and telling such a text apart costs more than orjson saves."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value)


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


def _socket_failure_disconnects(context: ExceptionContext) -> None:
    """A statement the driver gave up on (its command timeout: the server answered
    nothing, not even its own statement timeout) or a socket error leaves the connection
    unusable: invalidate it, so that it is aborted (`_abort_invalidated`) instead of
    being rolled back and returned to the pool, where every later use would wait on it.

    Only this connection: its pool-mates are replaced when they fail in turn. Marking the
    whole pool would close each of them gracefully on its next checkout, and a graceful
    close waits 2 s for a server that may not answer."""
    if isinstance(context.original_exception, OSError):  # TimeoutError is an OSError
        context.is_disconnect = True
        context.invalidate_pool_on_disconnect = False
    elif context.connection is None and not context.is_pre_ping:
        # No connection: the server refused to open one, whatever its SQLSTATE says
        # (55000 for a database set to `ALLOW_CONNECTIONS false`, 3D000 for one dropped,
        # 28P01 for a password rotated under us). For the hub that is PostgreSQL being
        # unavailable (outages.py reads `connection_invalidated`), not a bug of ours.
        context.is_disconnect = True


def _abort_invalidated(
    dbapi_connection: Any, record: ConnectionPoolEntry, exception: BaseException | None
) -> None:
    """Close an invalidated connection at once (abort its socket): SQLAlchemy's graceful
    close first waits up to 2 s for the server's goodbye, or for the cancellation of a
    timed-out statement that a hung server never acknowledges."""
    driver = record.driver_connection
    if driver is not None and not driver.is_closed():
        driver.terminate()


def create_engine(
    url: str,
    *,
    relaxed_commits: bool = False,
    pool_size: int = 10,
    connect_timeout_s: float = 5.0,
    statement_timeout_s: float = 30.0,
    pool_timeout_s: float = 5.0,
) -> AsyncEngine:
    """The engine; with `relaxed_commits` its connections commit without waiting for the
    WAL flush (`synchronous_commit = off`): only for work whose loss in a PostgreSQL crash
    is harmless, such as the outbox's claims and settlements (lost, it is re-sent).

    Nothing waits unbounded: a connect and a statement fail after their timeouts (bounded
    as `connect_options` says), and a pool checkout after its own. The hub passes its
    settings' (short) values; the defaults suit command-line work.

    At most `pool_size` connections, each kept once made: overflow connections were
    opened by a burst and closed again one checkout later, and connecting is costly
    (docs/scaling.md)."""
    engine = create_async_engine(
        asyncpg_url(url),
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=pool_timeout_s,
        json_serializer=json_text,
        connect_args=connect_options(
            connect_timeout_s=connect_timeout_s,
            statement_timeout_s=statement_timeout_s,
            relaxed_commits=relaxed_commits,
        ),
    )
    event.listen(engine.sync_engine.pool, "checkout", _refuse_closed)
    event.listen(engine.sync_engine.pool, "invalidate", _abort_invalidated)
    event.listen(engine.sync_engine, "handle_error", _socket_failure_disconnects)
    return engine


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
