"""Request and response bodies of the admin API's keys, lists, user lookup and audit log."""

from __future__ import annotations

from notifyhub.api.schemas import (
    TIME_EXAMPLE,
    ApiKeyOut,
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


class ApiKeyCreated(ApiKeyOut):
    """The key just made, with its secret: shown this once, never again."""

    model_config = examples(
        {**_KEY_OUT, "key": "nh_3f9a1c2b7d4e_x4Zb9q7VdC1mN0pLkR2sT5uW8yA3eG6hJ"}
    )

    key: str
    """The secret to send as `Authorization: Bearer <key>`; store it now."""
