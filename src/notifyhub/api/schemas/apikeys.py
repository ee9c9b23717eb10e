"""Bodies of the admin API's keys (the secret is shown once, at creation)."""

from __future__ import annotations

from notifyhub.api.schemas.common import (
    TIME_EXAMPLE,
    Documented,
    Instant,
    Name,
    Strict,
    Tenant,
    examples,
)
from notifyhub.domain.auth import Scope

_KEY_OUT = {
    "name": "wms-consumer",
    "scope": "consume",
    "tenant": "default",
    "created_at": TIME_EXAMPLE,
    "revoked_at": None,
}


class ApiKeyIn(Strict):
    """A new API key: its name (unique across the hub), scope and tenant."""

    model_config = examples({"name": "wms-consumer", "scope": "consume", "tenant": "default"})

    name: Name
    """A unique name for the key (409 when taken)."""
    scope: Scope
    """`publish`, `consume` or `admin` (admin admits every scope)."""
    tenant: Tenant | None = None
    """The tenant it is bound to; null (only for an unbound admin key) makes a key of
    every tenant. A tenant-bound admin key may only name its own tenant."""


class ApiKeyOut(Documented):
    """An API key's public facts (never the key itself)."""

    model_config = examples(
        {
            "name": "wms-publisher",
            "scope": "publish",
            "tenant": "default",
            "created_at": TIME_EXAMPLE,
            "revoked_at": None,
        }
    )

    name: str
    """The name given at creation."""
    scope: str
    """`publish`, `consume` or `admin`."""
    tenant: str | None
    """The tenant it is bound to; null for a key of every tenant."""
    created_at: Instant
    """When it was created."""
    revoked_at: Instant | None
    """When it was revoked; null while it is valid."""


class ApiKeyCreated(ApiKeyOut):
    """The key just made, with its secret: shown this once, never again."""

    model_config = examples(
        {**_KEY_OUT, "key": "nh_3f9a1c2b7d4e_x4Zb9q7VdC1mN0pLkR2sT5uW8yA3eG6hJ"}
    )

    key: str
    """The secret to send as `Authorization: Bearer <key>`; store it now."""


class ApiKeyList(Documented):
    """The API keys the caller may see (a tenant-bound key sees its tenant's)."""

    model_config = examples(
        {
            "keys": [
                {
                    "name": "wms-publisher",
                    "scope": "publish",
                    "tenant": "default",
                    "created_at": TIME_EXAMPLE,
                    "revoked_at": None,
                }
            ]
        }
    )

    keys: list[ApiKeyOut]
    """The keys, revoked ones included."""
