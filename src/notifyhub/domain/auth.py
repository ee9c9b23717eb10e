"""Who is calling: a service holding an API key, or a user holding a token."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from notifyhub.errors import PermissionDenied

API_KEY_PREFIX = "nh_"
"""Every API key starts so (services/apikeys.py); a token (a JWT) never does."""
WANTS_API_KEY = "this route takes an API key (nh_...); the credential sent is a user token"
WANTS_TOKEN = "this route takes a user token (a JWT); the credential sent is an API key"


def looks_like_api_key(credential: str) -> bool:
    return credential.startswith(API_KEY_PREFIX)


def looks_like_token(credential: str) -> bool:
    """A JWT's shape: three dot-separated parts (header, claims, signature)."""
    return credential.count(".") == 2 and not looks_like_api_key(credential)


class Scope(StrEnum):
    PUBLISH = "publish"
    CONSUME = "consume"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class ServicePrincipal:
    """A service authenticated by an API key, optionally bound to one tenant."""

    key_id: str
    name: str
    scope: Scope
    tenant: str | None

    def allows(self, scope: Scope) -> bool:
        return self.scope is Scope.ADMIN or self.scope is scope

    def may_act_on(self, tenant: str) -> bool:
        return self.tenant is None or self.tenant == tenant

    def own(self, tenant: str) -> str:
        """`tenant`, when this key may act on it; else `PermissionDenied` (a 403)."""
        if not self.may_act_on(tenant):
            raise PermissionDenied(f"this API key may not act on tenant {tenant}")
        return tenant


@dataclass(frozen=True, slots=True)
class UserPrincipal:
    """A user authenticated by a verified JWT (or a stream token derived from one)."""

    tenant: str
    user: str
    issued_at: float | None = field(default=None, compare=False)
    """The token's `iat` (seconds), when it has one: checked against the user's "not
    before" (services/revocations.py); not part of who the user is."""
