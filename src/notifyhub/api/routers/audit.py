"""Admin API: the audit log of admin actions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from notifyhub.api.deps import Admin, Unit
from notifyhub.api.openapi import SERVICE
from notifyhub.api.paging import LimitQuery, SinceQuery, TenantFilter, UntilQuery
from notifyhub.api.schemas.audit import AuditEntryOut, AuditPage
from notifyhub.api.schemas.common import NO_CONTROL, Name
from notifyhub.services import audit

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)

AuditCursor = Annotated[
    str | None,
    Query(
        pattern=r"^[0-9]{1,18}$",
        description="The previous page's `next_cursor`; omit for the first page.",
        examples=["1042"],
    ),
]


@router.get("/audit", response_model=AuditPage)
async def list_audit(
    principal: Admin,
    unit: Unit,
    tenant: TenantFilter = None,
    key: Annotated[
        Name | None,
        Query(description="Only actions of the API key of this name.", examples=["ops-admin"]),
    ] = None,
    route: Annotated[
        str | None,
        Query(
            max_length=300,
            pattern=NO_CONTROL,
            description="Only actions on this route template.",
            examples=["/v1/admin/groups/{group}"],
        ),
    ] = None,
    since: SinceQuery = None,
    until: UntilQuery = None,
    cursor: AuditCursor = None,
    limit: LimitQuery = 100,
) -> AuditPage:
    """Every mutating request made with an admin key (refused ones too), newest first. A
    tenant-bound key reads its tenant's entries only."""
    if principal.tenant is not None:
        tenant = principal.own(tenant or principal.tenant)
    where = audit.AuditFilter(tenant, key, route, since, until)
    entries, next_cursor = await audit.read(unit.session, where, cursor, limit)
    return AuditPage(
        entries=[AuditEntryOut.model_validate(e, from_attributes=True) for e in entries],
        next_cursor=next_cursor,
    )
