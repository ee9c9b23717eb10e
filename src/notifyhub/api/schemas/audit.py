"""Bodies of the admin audit log."""

from __future__ import annotations

from notifyhub.api.schemas.common import TIME_EXAMPLE, Documented, Instant, examples


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
    at: Instant
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
    """What the route named: its path parameters joined with `/` as they came (control
    characters escaped, as `\\x00`; at most 500 characters), or the created key's name;
    null when it named nothing."""
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
