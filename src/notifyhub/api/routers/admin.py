"""Admin API: groups (roles are groups)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from notifyhub.api.deps import Admin, AppState, Session, Unit
from notifyhub.api.openapi import NOT_FOUND, SERVICE
from notifyhub.api.params import GroupPath, TenantQuery
from notifyhub.api.schemas.common import NO_CONTROL
from notifyhub.api.schemas.groups import GroupList, GroupOut, MembersChange, MembersPage
from notifyhub.services import groups

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)


@router.put(
    "/groups/{group}",
    response_model=GroupOut,
    responses={201: {"model": GroupOut, "description": "Created"}},
)
async def create_group(
    group: GroupPath,
    principal: Admin,
    session: Session,
    response: Response,
    tenant: TenantQuery = "default",
) -> GroupOut:
    """Create the group (201), or answer the existing one (200)."""
    created = await groups.create_group(session, principal.own(tenant), group)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    found = await groups.get_group(session, tenant, group)
    return GroupOut(name=group, tenant=tenant, members=found.members)


@router.get("/groups/{group}", response_model=GroupOut, responses=NOT_FOUND)
async def get_group(
    group: GroupPath, principal: Admin, session: Session, tenant: TenantQuery = "default"
) -> GroupOut:
    """The group and its member count."""
    found = await groups.get_group(session, principal.own(tenant), group)
    return GroupOut(name=group, tenant=tenant, members=found.members)


@router.delete("/groups/{group}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_group(
    group: GroupPath, principal: Admin, state: AppState, unit: Unit, tenant: TenantQuery = "default"
) -> Response:
    """Delete the group and its memberships, and unsubscribe it from every topic of the
    tenant that lists it (each such topic changes as a `PATCH` removing the group would):
    a group created later under the same name is subscribed to nothing."""
    await groups.delete_group(unit, state["topics"], principal.own(tenant), group)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/groups", response_model=GroupList)
async def list_groups(
    principal: Admin, session: Session, tenant: TenantQuery = "default"
) -> GroupList:
    """The tenant's groups."""
    found = await groups.list_groups(session, principal.own(tenant))
    return GroupList(
        groups=[GroupOut(name=g.name, tenant=tenant, members=g.members) for g in found]
    )


@router.post("/groups/{group}/members", response_model=GroupOut, responses=NOT_FOUND)
async def change_members(
    group: GroupPath,
    body: MembersChange,
    principal: Admin,
    session: Session,
    tenant: TenantQuery = "default",
) -> GroupOut:
    """Add and remove members; the answer carries the new member count."""
    changed = await groups.change_members(
        session, principal.own(tenant), group, add=body.add, remove=body.remove
    )
    return GroupOut(name=group, tenant=tenant, members=changed.members)


@router.get("/groups/{group}/members", response_model=MembersPage, responses=NOT_FOUND)
async def list_members(
    group: GroupPath,
    principal: Admin,
    session: Session,
    tenant: TenantQuery = "default",
    cursor: Annotated[
        str | None,
        Query(
            max_length=200,
            pattern=NO_CONTROL,
            description="The previous page's `next_cursor`; omit for the first page.",
            examples=["bob"],
        ),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=1000, description="Members per page.", examples=[100])
    ] = 100,
) -> MembersPage:
    """The group's members, a page at a time, by user id."""
    members, next_cursor = await groups.list_members(
        session, principal.own(tenant), group, cursor=cursor, limit=limit
    )
    return MembersPage(members=members, next_cursor=next_cursor)
