"""PostgreSQL's "not now" errors are outages by SQLSTATE class; other errors are not. A
Redis connection its peer reset is an outage on uvloop too."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

import asyncpg
import pytest
import uvloop
from redis.asyncio import Redis
from sqlalchemy.exc import DBAPIError
from starlette.requests import Request

from notifyhub.api.errors import problem_for
from notifyhub.outages import outage_of


def _wrapped(error: Exception) -> DBAPIError:
    """As SQLAlchemy's asyncpg dialect raises it: a DBAPIError wrapping the driver's error."""
    try:
        raise RuntimeError(str(error)) from error
    except RuntimeError as adapted:
        return DBAPIError("SELECT 1", None, adapted)


@pytest.mark.parametrize(
    "sqlstate",
    ["08006", "08001", "53300", "53100", "57P01", "57P02", "57P03", "57014", "40001", "40P01"],
)
def test_a_postgres_error_that_means_not_now_is_an_outage(sqlstate: str) -> None:
    error_class = asyncpg.PostgresError.get_message_class_for_sqlstate(sqlstate)
    error = error_class(f"sqlstate {sqlstate}")
    assert outage_of(error) == "postgres"
    assert outage_of(_wrapped(error)) == "postgres"


@pytest.mark.parametrize("sqlstate", ["23505", "42601", "22P02", "55000", "42P01"])
def test_a_postgres_error_about_the_request_or_our_sql_is_not(sqlstate: str) -> None:
    error_class = asyncpg.PostgresError.get_message_class_for_sqlstate(sqlstate)
    error = error_class(f"sqlstate {sqlstate}")
    assert outage_of(error) is None
    assert outage_of(_wrapped(error)) is None


async def _reset_connection_error() -> BaseException:
    """What the Redis driver raises on uvloop when a pooled connection's peer reset it
    (a master killed under load, a proxy dropping idle connections) and a command is
    then written to it: the event loop already closed the transport."""
    accepted: list[asyncio.StreamWriter] = []

    async def pong(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """+PONG to each command (the connection's handshake, then PING)."""
        accepted.append(writer)
        with contextlib.suppress(OSError):
            while data := await reader.read(4096):
                commands = data.count(b"\r\n*") + data.startswith(b"*")
                writer.write(b"+PONG\r\n" * commands)

    server = await asyncio.start_server(pong, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    redis = Redis(port=port, socket_timeout=2)
    try:
        assert await redis.ping()
        for writer in accepted:  # an RST, not a FIN
            linger = struct.pack("ii", 1, 0)
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            writer.transport.abort()
        await asyncio.sleep(0.1)
        with pytest.raises(Exception) as raised:  # noqa: PT011 (the class is the question)
            await redis.ping()
        return raised.value
    finally:
        await redis.aclose()
        server.close()


def test_a_redis_connection_reset_under_uvloop_is_a_redis_outage() -> None:
    """uvloop refuses the write with a RuntimeError ("the handler is closed") where
    asyncio's own loop gives an OSError that redis-py reports as a ConnectionError: it
    was a 500 ("unexpected error") in a Cluster failover under load, now a 503."""
    error = uvloop.run(_reset_connection_error())
    assert outage_of(error) == "redis", repr(error)
    request = Request({"type": "http", "method": "GET", "path": "/x", "headers": []})
    response = asyncio.run(problem_for(request, error))
    assert response.status_code == 503
    assert outage_of(RuntimeError("the handler is closed")) is None  # not the driver's


def test_an_attribute_error_outside_the_cluster_client_is_a_bug() -> None:
    """Only redis-py's cluster client raising it counts as a Redis outage (a slot its map
    lost mid-change: tests/cluster/test_topology.py); anywhere else it is a 500."""
    try:
        _ = object().missing  # type: ignore[attr-defined]
    except AttributeError as exc:
        error = exc
    assert outage_of(error) is None
    request = Request({"type": "http", "method": "GET", "path": "/x", "headers": []})
    assert asyncio.run(problem_for(request, error)).status_code == 500
