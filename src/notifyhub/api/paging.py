"""The query parameters every admin list shares: a cursor, a page size, a time range."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from notifyhub.api.schemas.common import NO_CONTROL, TIME_EXAMPLE, Tenant, Time

CursorQuery = Annotated[
    str | None,
    Query(
        max_length=200,
        pattern=NO_CONTROL,
        description="The previous page's `next_cursor`; omit for the first page.",
        examples=["restock"],
    ),
]
LimitQuery = Annotated[int, Query(ge=1, le=1000, description="Items per page.", examples=[100])]
SinceQuery = Annotated[
    Time | None,
    Query(
        description="Only what happened at or after this time (RFC 3339, or epoch ms).",
        examples=[TIME_EXAMPLE],
    ),
]
UntilQuery = Annotated[
    Time | None,
    Query(
        description="Only what happened before this time (RFC 3339, or epoch ms).",
        examples=["2026-11-21T09:15:02.113Z"],
    ),
]
TenantFilter = Annotated[
    Tenant | None,
    Query(
        description="Only this tenant's (a tenant-bound key: its own, the default; another "
        "is 403). Omitted with an unbound key: every tenant's.",
        examples=["default"],
    ),
]
