"""The audit log of admin actions: who did what to which tenant, when, and how it ended.

Where it is written decides what it promises. An action that ends well is recorded in
the request's own unit of work, so the entry and the action's rows commit together or
not at all: an answered 2xx means both are in PostgreSQL, and an entry that cannot be
written fails the action (503) instead of letting it pass unrecorded. An action that
ends in an error changed nothing (its unit rolls back), and its refusal is recorded in
a transaction of its own. An action that lives in Redis only (a delayed queue's
restore) is recorded in the same unit after it ran: if PostgreSQL then fails, the
caller gets a 503 although Redis changed; retrying is safe (such actions are idempotent).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import AuditEntry
from notifyhub.db.repositories import audit as repo
from notifyhub.db.repositories.audit import AuditFilter
from notifyhub.domain.auth import ServicePrincipal
from notifyhub.domain.notification import CONTROL
from notifyhub.errors import InvalidInput

ALL_TENANTS = "*"
"""The tenant of an entry that acted on no one tenant (an unbound key creating an unbound
key, restoring every tenant's messages); no tenant can have this name."""

__all__ = ["ALL_TENANTS", "Action", "AuditFilter", "AuditRecord", "read", "record"]


@dataclass(frozen=True, slots=True)
class Action:
    """What a request did: the key that made it, where, and how it ended."""

    key: ServicePrincipal
    tenant: str
    method: str
    route: str
    target: str | None
    status: int


@dataclass(frozen=True, slots=True)
class AuditRecord:
    id: int
    at: datetime
    tenant: str
    key_name: str
    key_tenant: str | None
    method: str
    route: str
    target: str | None
    status: int


def _storable(text: str, limit: int) -> str:
    """`text` as PostgreSQL can keep it and a reader can tell what came: control
    characters and lone surrogates as Python writes them escaped (`\\x00`, `\\n`,
    `\\ud800`), then at most `limit` characters. A refused request's target is its path
    parameters as they came, before any validation."""
    escaped = CONTROL.sub(lambda found: found[0].encode("unicode_escape").decode(), text)
    return escaped[:limit]


def _row(action: Action) -> AuditEntry:
    return AuditEntry(
        tenant=action.tenant,
        key_name=action.key.name,
        key_tenant=action.key.tenant,
        method=action.method,
        route=_storable(action.route, 300),
        target=None if action.target is None else _storable(action.target, 500),
        status=action.status,
    )


async def record(session: AsyncSession, action: Action) -> None:
    """Add the entry to the caller's transaction: the action's (the caller commits both),
    or, for an action that failed and rolled back, one of its own."""
    await repo.add(session, _row(action))


def _cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    if not cursor.isdigit() or len(cursor) > 18:
        raise InvalidInput("cursor: not a cursor this list gave")
    return int(cursor)


async def read(
    session: AsyncSession, where: AuditFilter, cursor: str | None, limit: int
) -> tuple[list[AuditRecord], str | None]:
    """A page of entries, newest first, and the cursor of the next (None: the last)."""
    rows = await repo.page(session, where, _cursor(cursor), limit + 1)
    more = len(rows) > limit
    found = [
        AuditRecord(
            r.id, r.at, r.tenant, r.key_name, r.key_tenant, r.method, r.route, r.target, r.status
        )
        for r in rows[:limit]
    ]
    return found, str(found[-1].id) if more else None
