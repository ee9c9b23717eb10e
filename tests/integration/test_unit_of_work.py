"""The unit of work: after-commit work runs after a commit only, a unit that needs no
SQL never takes a connection, autocommit units and savepoints."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.unit import UnitOfWork


async def _exists(sessionmaker: async_sessionmaker[AsyncSession], table: str) -> bool:
    async with sessionmaker() as session:
        found = await session.scalar(text("SELECT to_regclass(:t) IS NOT NULL"), {"t": table})
    return bool(found)


async def test_after_commit_work_runs_once_committed_in_order(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    table = f"uow_{uuid.uuid4().hex[:8]}"
    seen: list[tuple[str, bool]] = []

    async def first() -> None:
        seen.append(("first", await _exists(sessionmaker, table)))

    async def second() -> None:
        seen.append(("second", await _exists(sessionmaker, table)))

    async with UnitOfWork(sessionmaker) as unit:
        await unit.session.execute(text(f"CREATE TABLE {table} (id int)"))
        unit.after_commit(first)
        unit.after_commit(second)
        assert seen == []
    assert seen == [("first", True), ("second", True)]  # another connection sees the rows
    async with sessionmaker.begin() as session:
        await session.execute(text(f"DROP TABLE {table}"))


async def test_after_commit_work_never_runs_after_a_rollback(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    table = f"uow_{uuid.uuid4().hex[:8]}"
    ran: list[str] = []

    async def callback() -> None:
        ran.append("ran")

    async def failing_request() -> None:
        async with UnitOfWork(sessionmaker) as unit:
            await unit.session.execute(text(f"CREATE TABLE {table} (id int)"))
            unit.after_commit(callback)
            raise RuntimeError("the request failed")

    with pytest.raises(RuntimeError):
        await failing_request()
    assert ran == []
    assert not await _exists(sessionmaker, table)


async def test_a_failed_commit_runs_no_after_commit_work(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    ran: list[str] = []

    async def callback() -> None:
        ran.append("ran")

    async def request_whose_commit_fails() -> None:
        async with UnitOfWork(sessionmaker) as unit:
            table = f"uow_{uuid.uuid4().hex[:8]}"
            await unit.session.execute(
                text(
                    f"CREATE TEMP TABLE {table} (id int,"
                    " CONSTRAINT deferred_unique UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)"
                )
            )
            # a deferred constraint is checked at COMMIT: the commit itself fails
            await unit.session.execute(text(f"INSERT INTO {table} VALUES (1), (1)"))
            unit.after_commit(callback)

    with pytest.raises(IntegrityError, match="deferred_unique"):
        await request_whose_commit_fails()
    assert ran == []


async def test_a_unit_that_runs_no_sql_takes_no_connection() -> None:
    engine = create_engine("postgresql+asyncpg://nobody@127.0.0.1:1/unreachable")
    ran: list[str] = []

    async def callback() -> None:
        ran.append("ran")

    try:
        async with UnitOfWork(create_sessionmaker(engine)) as unit:
            unit.after_commit(callback)
    finally:
        await engine.dispose()
    assert ran == ["ran"]  # PostgreSQL was never asked: Redis-only work survives its outage


async def test_an_autocommit_unit_commits_each_statement_as_it_runs(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """Its statements are visible to other connections before it ends, stay committed
    when it fails afterwards, and its after-commit work runs on a clean exit only."""
    table = f"uow_{uuid.uuid4().hex[:8]}"
    ran: list[str] = []

    async def callback() -> None:
        ran.append("ran")

    async def failing_after_its_statement() -> None:
        async with UnitOfWork(sessionmaker, autocommit=True) as unit:
            await unit.session.execute(text(f"CREATE TABLE {table} (id int)"))
            assert await _exists(sessionmaker, table)  # committed already
            unit.after_commit(callback)
            raise RuntimeError("after the statement")

    with pytest.raises(RuntimeError):
        await failing_after_its_statement()
    assert ran == []
    assert await _exists(sessionmaker, table)  # no rollback undoes it
    async with UnitOfWork(sessionmaker, autocommit=True) as unit:
        await unit.session.execute(text(f"DROP TABLE {table}"))
        unit.after_commit(callback)
    assert ran == ["ran"]
    assert not await _exists(sessionmaker, table)


async def test_a_savepoint_undoes_only_its_own_work(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """A unique violation inside `unit.savepoint()` rolls back to it; the unit goes on and
    commits the rest."""
    table = f"uow_{uuid.uuid4().hex[:8]}"
    async with UnitOfWork(sessionmaker) as unit:
        await unit.session.execute(text(f"CREATE TABLE {table} (id int PRIMARY KEY)"))
        await unit.session.execute(text(f"INSERT INTO {table} VALUES (1)"))
        with pytest.raises(IntegrityError):
            async with unit.savepoint():
                await unit.session.execute(text(f"INSERT INTO {table} VALUES (1)"))
        await unit.session.execute(text(f"INSERT INTO {table} VALUES (2)"))
    async with UnitOfWork(sessionmaker) as unit:
        found = await unit.session.scalars(text(f"SELECT id FROM {table} ORDER BY id"))
        assert list(found) == [1, 2]
        await unit.session.execute(text(f"DROP TABLE {table}"))
