"""The unit of work: one transaction, and the work that may only follow its commit.

The caller owns it (the request dependency, a worker's batch, a router whose service
must commit before answering); services add rows through repositories and register
what touches the outside world once the rows are durable (queueing in Redis, sends,
idempotency answers) with `after_commit`. The session is opened on first use, so a
unit whose work turns out to need only Redis never takes a PostgreSQL connection.

It is the one way to open a transaction: repositories only add and flush (a savepoint
one needs is the caller's `unit.savepoint()`), and a service that owns its transactions
by contract (a worker's batch, the durable inbox's group commit) is given `Units`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, AsyncSessionTransaction, async_sessionmaker

AfterCommit = Callable[[], Awaitable[object]]
T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)


class Units(Protocol):
    """Opens units of work; what the composition gives a service that owns its
    transactions by contract (so the service never sees a sessionmaker)."""

    def __call__(self, *, autocommit: bool = False) -> UnitOfWork: ...


def units(sessionmaker: async_sessionmaker[AsyncSession]) -> Units:
    return functools.partial(UnitOfWork, sessionmaker)


class UnitOfWork:
    """`async with UnitOfWork(sessionmaker) as unit:` commits on a clean exit, rolls back
    on an exception, and runs the `after_commit` callbacks, in order, only after a
    successful commit (never after a rollback). A callback that raises stops the rest
    and propagates: the rows stay committed, the caller sees the error.

    With `autocommit=True` each statement commits on its own (no BEGIN and COMMIT round
    trips), for work done in single statements that are atomic by themselves; its
    session is opened on entering, and `after_commit` callbacks run on a clean exit."""

    __slots__ = ("_autocommit", "_callbacks", "_session", "_sessionmaker", "info")

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], *, autocommit: bool = False
    ) -> None:
        self._sessionmaker = sessionmaker
        self._autocommit = autocommit
        self._session: AsyncSession | None = None
        self._callbacks: list[AfterCommit] = []
        self.info: dict[str, object] = {}
        """The unit's own scratch space: say, a service gathering its after-commit work
        into one callback."""

    @property
    def session(self) -> AsyncSession:
        """The unit's session (its transaction begins with the first statement)."""
        if self._session is None:
            self._session = self._sessionmaker()
        return self._session

    def after_commit(self, callback: AfterCommit) -> None:
        self._callbacks.append(callback)

    def savepoint(self) -> AsyncSessionTransaction:
        """`async with unit.savepoint():` a failure inside (say, a unique violation the
        caller answers) rolls back only what was done inside; the unit goes on."""
        return self.session.begin_nested()

    async def __aenter__(self) -> UnitOfWork:
        if self._autocommit:
            isolation = {"isolation_level": "AUTOCOMMIT"}
            try:
                await self.session.connection(execution_options=isolation)
            except BaseException:
                await self._finish(committed=False)
                raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._finish(committed=exc is None)
        if exc is None:
            await self._run_callbacks()

    async def _finish(self, *, committed: bool) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        try:
            if self._autocommit:
                return  # each statement committed as it ran
            if committed:
                await session.commit()
            else:
                await session.rollback()
        finally:
            await session.close()

    async def _run_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            await callback()


async def each_alone_on_failure(
    unit: UnitOfWork,
    items: Sequence[T],
    work: Callable[[Sequence[T]], Awaitable[R]],
    failed: Callable[[T], Awaitable[object]],
) -> list[R]:
    """`work` on a batch in a savepoint; when it raises, the batch is undone and `work`
    runs on each item alone, so one item that cannot be done (a stored row that does not
    read) holds back only itself: `failed(item)` is called for it, inside the `except`
    (`log.exception` there shows why). The results of the calls that succeeded."""
    try:
        async with unit.savepoint():
            return [await work(items)]
    except Exception:  # someone's fault: find whose, item by item
        if len(items) == 1:
            await failed(items[0])
            return []
        log.warning("%d items failed together; done one by one", len(items))
    done: list[R] = []
    for item in items:
        done += await each_alone_on_failure(unit, [item], work, failed)
    return done
