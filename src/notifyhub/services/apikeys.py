"""Service API keys: `nh_<prefix>_<secret>`, shown once, stored as a SHA-256 hash.

The secret is 32 random bytes, so a fast hash is the right choice (no password
stretching needed); lookups go by the public prefix, comparison is constant-time.

Every function takes a session (the hub's unit of work) or a bare asyncpg connection
(`notifyhub apikey`, which so loads no SQLAlchemy): the same rules and statements either
way.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

from ulid import ULID

from notifyhub.db.repositories import apikeys as repo
from notifyhub.db.repositories.apikeys import Db, KeyRow
from notifyhub.domain.auth import WANTS_API_KEY, Scope, ServicePrincipal, looks_like_token
from notifyhub.errors import AuthenticationError, Conflict, NotFound, PermissionDenied


@dataclass(frozen=True, slots=True)
class ApiKeyInfo:
    name: str
    scope: Scope
    tenant: str | None
    created_at: datetime
    revoked_at: datetime | None


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _info(row: KeyRow) -> ApiKeyInfo:
    return ApiKeyInfo(row.name, Scope(row.scope), row.tenant, row.created_at, row.revoked_at)


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key just made: its facts, and the plaintext shown this once."""

    info: ApiKeyInfo
    key: str


async def create_key(db: Db, *, name: str, scope: Scope, tenant: str | None) -> str:
    """Store a new key and return its plaintext (the only time it is ever shown)."""
    return (await _new_key(db, name, scope, tenant)).key


async def _new_key(db: Db, name: str, scope: Scope, tenant: str | None) -> NewKey:
    """A name its tenant (or the hub-wide keys) has already is a 409; no statement
    failed, so the caller's unit goes on (`make run` tries another name for a dev key)."""
    prefix = secrets.token_hex(6)
    key = f"nh_{prefix}_{secrets.token_urlsafe(32)}"
    row = await repo.add(
        db,
        key_id=str(ULID()),
        name=name,
        prefix=prefix,
        key_hash=_hash(key),
        scope=scope.value,
        tenant=tenant,
    )
    if row is None:
        where = f"tenant {tenant}" if tenant is not None else "the hub-wide keys"
        raise Conflict(f"{where} has an API key named {name!r}")
    return NewKey(_info(row), key)


async def list_keys(db: Db) -> list[ApiKeyInfo]:
    return [_info(row) for row in await repo.all_keys(db)]


async def revoke_key(db: Db, name: str, tenant: str | None = None) -> str | None:
    """Revoke the key named `name` of `tenant` (None: the hub-wide one); its id, or None
    when there is no such active key (the CLI's revoke)."""
    row = await repo.by_name(db, tenant, name)
    if row is None or not await repo.revoke(db, row.id):
        return None
    return row.id


async def issue_key(
    db: Db, by: ServicePrincipal, *, name: str, scope: Scope, tenant: str | None
) -> NewKey:
    """Create a key on behalf of an admin key `by`: a key bound to a tenant makes keys of
    its own tenant only, never an unbound one (which could act on every tenant)."""
    if by.tenant is not None and tenant is None:
        raise PermissionDenied("a tenant-bound API key may not create an unbound key")
    if tenant is not None:
        by.own(tenant)
    return await _new_key(db, name, scope, tenant)


async def revoke_visible(db: Db, by: ServicePrincipal, name: str, tenant: str | None = None) -> str:
    """Revoke the key named `name` (of `tenant` if given) if `by` may see it; its id.
    A tenant-bound key names its own tenant's keys (naming another tenant is a 403; a
    name only another tenant has is a 404, worded like a name nobody has). An unbound key
    names the hub-wide key, else the only key of that name (several: a 409 asking for the
    tenant). Revoking a revoked key again changes nothing."""
    row = await _visible(db, by, name, tenant)
    if row is None:
        raise NotFound(f"no API key named {name!r}")
    if row.tenant is not None:
        by.own(row.tenant)  # (names the tenant acted on, for the audit log)
    await repo.revoke(db, row.id)
    return row.id


async def _visible(db: Db, by: ServicePrincipal, name: str, tenant: str | None) -> KeyRow | None:
    if by.tenant is not None or tenant is not None:
        return await repo.by_name(db, by.own(tenant or by.tenant or ""), name)
    rows = await repo.named(db, name)
    if len(rows) > 1 and rows[0].tenant is not None:
        raise Conflict(f"several tenants have an API key named {name!r}: name one (`tenant`)")
    return rows[0] if rows else None


async def authenticate(db: Db, presented: str) -> ServicePrincipal:
    parts = presented.split("_")
    if len(parts) < 3 or parts[0] != "nh" or len(presented) > 200:
        wrong_kind = looks_like_token(presented)
        raise AuthenticationError(WANTS_API_KEY if wrong_kind else "invalid API key")
    row = await repo.by_prefix(db, parts[1])
    if (
        row is None
        or row.revoked_at is not None
        or not hmac.compare_digest(row.key_hash, _hash(presented))
    ):
        raise AuthenticationError("invalid API key")
    return ServicePrincipal(key_id=row.id, name=row.name, scope=Scope(row.scope), tenant=row.tenant)
