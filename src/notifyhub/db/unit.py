"""The unit of work: one transaction, and the work that may only follow its commit.

The caller owns it (the request dependency, a worker's batch, a router whose service
must commit before answering); services add rows through repositories and register
what touches the outside world once the rows are durable (queueing in Redis, sends,
idempotency answers) with `after_commit`. The session is opened on first use, so a
unit whose work turns out to need only Redis never takes a PostgreSQL connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

AfterCommit = Callable[[], Awaitable[object]]


class UnitOfWork:
    """`async with UnitOfWork(sessionmaker) as unit:` commits on a clean exit, rolls back
    on an exception, and runs the `after_commit` callbacks, in order, only after a
    successful commit (never after a rollback). A callback that raises stops the rest
    and propagates: the rows stay committed, the caller sees the error."""

    __slots__ = ("_callbacks", "_session", "_sessionmaker")

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker
        self._session: AsyncSession | None = None
        self._callbacks: list[AfterCommit] = []

    @property
    def session(self) -> AsyncSession:
        """The unit's session (its transaction begins with the first statement)."""
        if self._session is None:
            self._session = self._sessionmaker()
        return self._session

    def after_commit(self, callback: AfterCommit) -> None:
        self._callbacks.append(callback)

    async def __aenter__(self) -> UnitOfWork:
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
