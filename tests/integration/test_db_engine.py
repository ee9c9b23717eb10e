"""The engine on real PostgreSQL: closed pooled connections are replaced without a ping,
relaxed commits only where asked, autocommitted statements, refused connects are outages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.unit import UnitOfWork
from notifyhub.outages import outage_of
from support.database import asyncpg_dsn, with_database


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url, pool_size=2)
    yield engine
    await engine.dispose()


async def _pid_and_driver(engine: AsyncEngine) -> tuple[int, asyncpg.Connection]:
    async with engine.connect() as connection:
        pid = int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())
        raw = await connection.get_raw_connection()
        return pid, raw.driver_connection


async def test_a_pooled_connection_the_server_closed_is_replaced_on_checkout(
    engine: AsyncEngine, database_url: str
) -> None:
    """What `pool_pre_ping` did with three round trips per checkout: after a restart or
    `pg_terminate_backend`, the next checkout gets a working connection, not an error."""
    pid, driver = await _pid_and_driver(engine)
    admin = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    async with asyncio.timeout(10):
        while not driver.is_closed():  # the event loop sees the server's close
            await asyncio.sleep(0.01)

    new_pid, _ = await _pid_and_driver(engine)
    assert new_pid != pid


async def test_a_burst_keeps_its_connections_and_opens_no_more_than_the_pool(
    database_url: str,
) -> None:
    """At most `pool_size` connections, each kept once made: the next burst gets the same
    backends (no overflow connection opened for one checkout and closed after it), and a
    checkout past the pool waits for one."""
    engine = create_engine(database_url, pool_size=2, pool_timeout_s=0.2)

    async def pid(connection: AsyncConnection) -> int:
        return int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())

    try:
        async with engine.connect() as a, engine.connect() as b:
            first = {await pid(a), await pid(b)}
            with pytest.raises(PoolTimeout):
                async with engine.connect():
                    pass
        async with engine.connect() as a, engine.connect() as b:
            assert {await pid(a), await pid(b)} == first
    finally:
        await engine.dispose()


async def test_relaxed_commits_only_on_the_engine_that_asks(
    engine: AsyncEngine, database_url: str
) -> None:
    relaxed = create_engine(database_url, relaxed_commits=True, pool_size=1)
    try:
        for each, expected in ((engine, "on"), (relaxed, "off")):
            async with each.connect() as connection:
                found = await connection.execute(text("SHOW synchronous_commit"))
                assert found.scalar_one() == expected
    finally:
        await relaxed.dispose()


async def test_an_autocommitted_statement_is_committed_when_it_returns(
    engine: AsyncEngine,
) -> None:
    sessionmaker = create_sessionmaker(engine)
    name = f"autocommit_{id(engine)}"
    async with UnitOfWork(sessionmaker, autocommit=True) as unit:
        session = unit.session
        await session.execute(text(f"CREATE TABLE {name} (n int)"))
        await session.execute(text(f"INSERT INTO {name} VALUES (1)"))
        async with sessionmaker() as other:  # another connection already sees it
            assert (await other.execute(text(f"SELECT n FROM {name}"))).scalar_one() == 1
        await session.execute(text(f"DROP TABLE {name}"))


async def test_a_connect_the_server_refuses_is_an_outage_a_bad_statement_is_not(
    engine: AsyncEngine, database_url: str
) -> None:
    """Whatever SQLSTATE the server refuses a connection with (3D000 here, 55000 for a
    database set to `ALLOW_CONNECTIONS false`), the hub cannot reach PostgreSQL: a 503.
    A statement the server rejects on a working connection is our bug: not an outage."""
    missing = create_engine(with_database(database_url, "nh_no_such_database"))
    try:
        with pytest.raises(DBAPIError) as refused:
            async with missing.connect():
                pass
    finally:
        await missing.dispose()
    assert refused.value.connection_invalidated
    assert outage_of(refused.value) == "postgres"
    with pytest.raises(DBAPIError) as rejected:
        async with engine.connect() as connection:
            await connection.execute(text("SELEC 1"))
    assert outage_of(rejected.value) is None


async def test_json_columns_keep_every_value_exactly(engine: AsyncEngine) -> None:
    """JSON parameters are written by orjson where it can, by the standard module where
    it cannot (an integer past 64 bits): every value comes back as it went in, and
    non-string keys as the standard module writes them."""
    value = {"big": 2**70 + 1, "small": -(2**63), "text": 'é\u2028"q"'}
    value["list"] = [1, 2.5, None, True]
    keyed = {1: "one"}
    statement = text("SELECT CAST(:v AS jsonb) AS v, CAST(:k AS jsonb) AS k").bindparams(
        bindparam("v", type_=JSONB), bindparam("k", type_=JSONB)
    )
    async with engine.connect() as connection:
        row = (await connection.execute(statement, {"v": value, "k": keyed})).one()
    assert row.v == value
    assert isinstance(row.v["big"], int)
    assert row.k == {"1": "one"}
