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
    if not await repo.add(session, row):
        raise Conflict(f"an API key named {name!r} exists")
    return key


async def list_keys(session: AsyncSession) -> list[ApiKeyInfo]:
    return [
        ApiKeyInfo(k.name, Scope(k.scope), k.tenant, k.created_at, k.revoked_at)
        for k in await repo.all_keys(session)
    ]


async def revoke_key(session: AsyncSession, name: str) -> bool:
    return await repo.revoke(session, name)


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
    row = await repo.by_name(session, name)
    assert row is not None  # just added, same transaction
    return NewKey(ApiKeyInfo(row.name, scope, row.tenant, row.created_at, row.revoked_at), key)


async def revoke_visible(session: AsyncSession, by: ServicePrincipal, name: str) -> None:
    """Revoke the key named `name` if `by` may see it. Another tenant's key is a 404,
    worded like a name nobody has; revoking a revoked key again changes nothing."""
    row = await repo.by_name(session, name)
    if row is None or (by.tenant is not None and row.tenant != by.tenant):
        raise NotFound(f"no API key named {name!r}")
    if row.tenant is not None:
        by.own(row.tenant)  # (names the tenant acted on, for the audit log)
    await repo.revoke(session, name)


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
