"""API key rows: every statement on `api_keys`, written once in PostgreSQL's `$n` form.

Two kinds of caller run the same statements: the hub in a unit of work's session (its
transaction), and the `notifyhub apikey` commands on a bare asyncpg connection
(db/driver.py), which loads neither SQLAlchemy nor the models. A rule a statement holds
(say, that a tenant's key names are unique) therefore holds for both.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult
    from sqlalchemy.ext.asyncio import AsyncSession


@runtime_checkable
class Rows(Protocol):
    """Runs a statement with positional arguments: an asyncpg connection is one as it is."""

    async def fetch(self, query: str, *args: Any) -> Sequence[Sequence[Any]]: ...

    async def fetchrow(self, query: str, *args: Any) -> Sequence[Any] | None: ...

    async def fetchval(self, query: str, *args: Any) -> Any: ...


Db: TypeAlias = "AsyncSession | Rows"
"""Where the statements run: a session (in its transaction) or a bare connection."""


class _SessionRows:
    """A session's statements: on its connection, in its transaction (begun if need be)."""

    __slots__ = ("_session",)

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def fetch(self, query: str, *args: Any) -> Sequence[Sequence[Any]]:
        return (await self._run(query, args)).all()

    async def fetchrow(self, query: str, *args: Any) -> Sequence[Any] | None:
        return (await self._run(query, args)).first()

    async def fetchval(self, query: str, *args: Any) -> Any:
        return (await self._run(query, args)).scalar()

    async def _run(self, query: str, args: tuple[Any, ...]) -> CursorResult[Any]:
        connection = await self._session.connection()
        return await connection.exec_driver_sql(query, args)


def _rows(db: Db) -> Rows:
    return db if isinstance(db, Rows) else _SessionRows(db)


@dataclass(frozen=True, slots=True)
class KeyRow:
    """A stored key (its hash, never the key)."""

    id: str
    name: str
    key_hash: str
    scope: str
    tenant: str | None
    created_at: datetime
    revoked_at: datetime | None


_COLUMNS = "id, name, key_hash, scope, tenant, created_at, revoked_at"
_ADD = f"""
INSERT INTO api_keys (id, name, key_prefix, key_hash, scope, tenant)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT ((coalesce(tenant, '')), name) DO NOTHING
RETURNING {_COLUMNS}"""
_BY_PREFIX = f"SELECT {_COLUMNS} FROM api_keys WHERE key_prefix = $1"
_ALL = f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at"
_BY_NAME = f"SELECT {_COLUMNS} FROM api_keys WHERE tenant IS NOT DISTINCT FROM $1 AND name = $2"
_NAMED = f"SELECT {_COLUMNS} FROM api_keys WHERE name = $1 ORDER BY tenant NULLS FIRST"
_REVOKE = """
UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id"""
_ACTIVE_AMONG = "SELECT id FROM api_keys WHERE id = ANY($1::varchar[]) AND revoked_at IS NULL"


async def add(
    db: Db, *, key_id: str, name: str, prefix: str, key_hash: str, scope: str, tenant: str | None
) -> KeyRow | None:
    """Insert a key; None when its tenant (or the hub-wide keys) has one of that name.
    A taken name fails no statement, so the caller's transaction goes on as it was."""
    row = await _rows(db).fetchrow(_ADD, key_id, name, prefix, key_hash, scope, tenant)
    return None if row is None else KeyRow(*row)


async def by_prefix(db: Db, prefix: str) -> KeyRow | None:
    row = await _rows(db).fetchrow(_BY_PREFIX, prefix)
    return None if row is None else KeyRow(*row)


async def all_keys(db: Db) -> list[KeyRow]:
    return [KeyRow(*row) for row in await _rows(db).fetch(_ALL)]


async def by_name(db: Db, tenant: str | None, name: str) -> KeyRow | None:
    """Tenant `tenant`'s key named `name`; a hub-wide key's when `tenant` is None."""
    row = await _rows(db).fetchrow(_BY_NAME, tenant, name)
    return None if row is None else KeyRow(*row)


async def named(db: Db, name: str) -> list[KeyRow]:
    """Every key named `name`, of any tenant (hub-wide first)."""
    return [KeyRow(*row) for row in await _rows(db).fetch(_NAMED, name)]


async def revoke(db: Db, key_id: str) -> bool:
    """Revoke the key; False when it was revoked already."""
    return await _rows(db).fetchval(_REVOKE, key_id) is not None


async def revoked_among(db: Db, key_ids: Collection[str]) -> list[str]:
    """Which of `key_ids` are revoked (or gone)."""
    active = await _rows(db).fetch(_ACTIVE_AMONG, list(key_ids))
    return sorted(set(key_ids) - {key_id for (key_id,) in active})
