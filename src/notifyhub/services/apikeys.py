"""Service API keys: `nh_<prefix>_<secret>`, shown once, stored as a SHA-256 hash.

The secret is 32 random bytes, so a fast hash is the right choice (no password
stretching needed); lookups go by the public prefix, comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from notifyhub.db.models import ApiKey
from notifyhub.db.repositories import apikeys as repo
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


async def create_key(session: AsyncSession, *, name: str, scope: Scope, tenant: str | None) -> str:
    """Store a new key and return its plaintext (the only time it is ever shown)."""
    prefix = secrets.token_hex(6)
    key = f"nh_{prefix}_{secrets.token_urlsafe(32)}"
    row = ApiKey(
        id=str(ULID()),
        name=name,
        key_prefix=prefix,
        key_hash=_hash(key),
        scope=scope.value,
        tenant=tenant,
    )
    try:
        async with session.begin_nested():  # a taken name leaves the caller's unit usable
            await repo.add(session, row)
    except IntegrityError:
        where = f"tenant {tenant}" if tenant is not None else "the hub-wide keys"
        raise Conflict(f"{where} has an API key named {name!r}") from None
    return key


async def list_keys(session: AsyncSession) -> list[ApiKeyInfo]:
    return [
        ApiKeyInfo(k.name, Scope(k.scope), k.tenant, k.created_at, k.revoked_at)
        for k in await repo.all_keys(session)
    ]


async def revoke_key(session: AsyncSession, name: str, tenant: str | None = None) -> str | None:
    """Revoke the key named `name` of `tenant` (None: the hub-wide one); its id, or None
    when there is no such active key (the CLI's revoke)."""
    row = await repo.by_name(session, tenant, name)
    if row is None or not await repo.revoke(session, row.id):
        return None
    return row.id


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key just made: its facts, and the plaintext shown this once."""

    info: ApiKeyInfo
    key: str


async def issue_key(
    session: AsyncSession, by: ServicePrincipal, *, name: str, scope: Scope, tenant: str | None
) -> NewKey:
    """Create a key on behalf of an admin key `by`: a key bound to a tenant makes keys of
    its own tenant only, never an unbound one (which could act on every tenant)."""
    if by.tenant is not None and tenant is None:
        raise PermissionDenied("a tenant-bound API key may not create an unbound key")
    if tenant is not None:
        by.own(tenant)
    key = await create_key(session, name=name, scope=scope, tenant=tenant)
    row = await repo.by_name(session, tenant, name)
    assert row is not None  # just added, same transaction
    return NewKey(ApiKeyInfo(row.name, scope, row.tenant, row.created_at, row.revoked_at), key)


async def revoke_visible(
    session: AsyncSession, by: ServicePrincipal, name: str, tenant: str | None = None
) -> str:
    """Revoke the key named `name` (of `tenant` if given) if `by` may see it; its id.
    A tenant-bound key names its own tenant's keys (naming another tenant is a 403; a
    name only another tenant has is a 404, worded like a name nobody has). An unbound key
    names the hub-wide key, else the only key of that name (several: a 409 asking for the
    tenant). Revoking a revoked key again changes nothing."""
    row = await _visible(session, by, name, tenant)
    if row is None:
        raise NotFound(f"no API key named {name!r}")
    if row.tenant is not None:
        by.own(row.tenant)  # (names the tenant acted on, for the audit log)
    await repo.revoke(session, row.id)
    return row.id


async def _visible(
    session: AsyncSession, by: ServicePrincipal, name: str, tenant: str | None
) -> ApiKey | None:
    if by.tenant is not None or tenant is not None:
        return await repo.by_name(session, by.own(tenant or by.tenant or ""), name)
    rows = await repo.named(session, name)
    if len(rows) > 1 and rows[0].tenant is not None:
        raise Conflict(f"several tenants have an API key named {name!r}: name one (`tenant`)")
    return rows[0] if rows else None


async def authenticate(session: AsyncSession, presented: str) -> ServicePrincipal:
    parts = presented.split("_")
    if len(parts) < 3 or parts[0] != "nh" or len(presented) > 200:
        wrong_kind = looks_like_token(presented)
        raise AuthenticationError(WANTS_API_KEY if wrong_kind else "invalid API key")
    row = await repo.by_prefix(session, parts[1])
    if (
        row is None
        or row.revoked_at is not None
        or not hmac.compare_digest(row.key_hash, _hash(presented))
    ):
        raise AuthenticationError("invalid API key")
    return ServicePrincipal(key_id=row.id, name=row.name, scope=Scope(row.scope), tenant=row.tenant)
