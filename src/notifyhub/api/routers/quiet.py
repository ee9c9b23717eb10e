"""Admin API: a tenant's default quiet hours (users' own are in `PUT
/v1/admin/users/{tenant}/{user}`)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from notifyhub.api.deps import Admin, Session
from notifyhub.api.openapi import SERVICE
from notifyhub.api.params import TenantQuery
from notifyhub.api.schemas.quiet import QuietDefaultsIn, QuietDefaultsOut
from notifyhub.db.repositories import quiet as repo

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)


@router.get("/quiet-defaults", response_model=QuietDefaultsOut)
async def get_quiet_defaults(
    principal: Admin, session: Session, tenant: TenantQuery = "default"
) -> QuietDefaultsOut:
    """The tenant's default quiet hours (`schedule` `{}`: none set)."""
    tenant = principal.own(tenant)
    found = await repo.default_of(session, tenant)
    if found is None:
        return QuietDefaultsOut(tenant=tenant, schedule={}, time_zone=None)
    return QuietDefaultsOut(tenant=tenant, schedule=found.schedule, time_zone=found.time_zone)


@router.put(
    "/quiet-defaults",
    response_model=QuietDefaultsOut,
    responses={201: {"model": QuietDefaultsOut, "description": "Created"}},
)
async def put_quiet_defaults(
    body: QuietDefaultsIn,
    principal: Admin,
    session: Session,
    response: Response,
    tenant: TenantQuery = "default",
) -> QuietDefaultsOut:
    """Create (201: the tenant had none) or replace (200) the tenant's default quiet
    hours: for users with no schedule of their own, their e-mails and Web Pushes that are
    not `critical` wait until a window ends, read in the user's time zone (else
    `time_zone` here, else UTC). The inbox copy and the stream are never delayed."""
    tenant = principal.own(tenant)
    created = await repo.put_default(session, tenant, body.schedule, body.time_zone)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return QuietDefaultsOut(tenant=tenant, schedule=body.schedule, time_zone=body.time_zone)
