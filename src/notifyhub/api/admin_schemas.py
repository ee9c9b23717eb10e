"""Request and response bodies of the admin API's keys, lists, user lookup and audit log."""

from __future__ import annotations

from datetime import datetime

from notifyhub.api.schemas import (
    TIME_EXAMPLE,
    ApiKeyOut,
    Documented,
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


class AuditEntryOut(Documented):
    """One admin action."""

    model_config = examples(
        {
            "id": 1042,
            "at": TIME_EXAMPLE,
            "tenant": "default",
            "key_name": "ops-admin",
            "key_tenant": None,
            "method": "PUT",
            "route": "/v1/admin/groups/{group}",
            "target": "replenishers",
            "status": 201,
        }
    )

    id: int
    """The entry's number (entries are numbered as they are written)."""
    at: datetime
    """When the action ended."""
    tenant: str
    """The tenant acted on; `*` for an action of no one tenant (by an unbound key)."""
    key_name: str
    """The name of the API key that made the request."""
    key_tenant: str | None
    """The tenant that key is bound to; null for an unbound key."""
    method: str
    """The HTTP method."""
    route: str
    """The route's template, as in the API reference."""
    target: str | None
    """What the route named: its path parameters joined with `/`, or the created key's
    name; null when it named nothing."""
    status: int
    """The HTTP status it was answered with (refusals are recorded too)."""


class AuditPage(Documented):
    """A page of the audit log, newest first."""

    model_config = examples(
        {
            "entries": [
                {
                    "id": 1042,
                    "at": TIME_EXAMPLE,
                    "tenant": "default",
                    "key_name": "ops-admin",
                    "key_tenant": None,
                    "method": "PUT",
                    "route": "/v1/admin/groups/{group}",
                    "target": "replenishers",
                    "status": 201,
                }
            ],
            "next_cursor": "1042",
        }
    )

    entries: list[AuditEntryOut]
    """Entries, newest first."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""
