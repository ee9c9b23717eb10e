"""asyncpg itself: the options every connection is opened with, and a bare connection.

The engine's pool (db/engine.py) and the command line's bare connection share the
options, so both are bounded alike. The bare connection is for `notifyhub apikey`: its
few statements each commit on their own, and a command that loads no SQLAlchemy answers
in a fraction of a second (SQLAlchemy, its ORM and the models take longer to import
than the command takes to run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import asyncpg

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

DRIVER_GRACE_S = 0.25
"""The driver gives up this long after the server's `statement_timeout` would have."""


def connect_options(
    *, connect_timeout_s: float, statement_timeout_s: float, relaxed_commits: bool = False
) -> dict[str, Any]:
    """asyncpg's `connect` arguments. Nothing waits unbounded: a connect fails after its
    timeout, and a statement is bounded twice: by the server's `statement_timeout` (a slow
    query is cancelled cleanly) and, a little later, by the driver (a server that answers
    nothing at all, stopped or cut off). With `relaxed_commits` a commit does not wait for
    the WAL flush (`synchronous_commit = off`)."""
    server_settings = {"statement_timeout": str(int(statement_timeout_s * 1000))}
    if relaxed_commits:
        server_settings["synchronous_commit"] = "off"
    return {
        "timeout": connect_timeout_s,
        "command_timeout": statement_timeout_s + DRIVER_GRACE_S,
        "server_settings": server_settings,
    }


def driver_url(url: str) -> str:
    """A SQLAlchemy URL (`postgresql+asyncpg://`) as asyncpg reads it (`postgresql://`)."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme.split('+', 1)[0]}{sep}{rest}"


async def connect(
    url: str, *, connect_timeout_s: float = 5.0, statement_timeout_s: float = 30.0
) -> Any:
    """One asyncpg connection to `url` (a `postgresql+asyncpg://` URL too), outside any
    pool, on which each statement commits on its own (work of several statements that
    must hold together takes a `UnitOfWork` instead). The defaults suit command-line
    work. The caller closes it."""
    options = connect_options(
        connect_timeout_s=connect_timeout_s, statement_timeout_s=statement_timeout_s
    )
    return await asyncpg.connect(driver_url(url), **options)


async def of_session(session: AsyncSession) -> Any:
    """The asyncpg connection under `session`, inside its transaction: for reads and
    writes of many rows, where SQLAlchemy's row handling costs more than the statement
    (docs/scaling.md, "Design notes")."""
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    return raw.driver_connection
