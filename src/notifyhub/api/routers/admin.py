"""Admin API: groups (roles are groups) and the list of API keys."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from notifyhub.api.deps import Admin, Session
from notifyhub.api.schemas import (
    ApiKeyList,
    ApiKeyOut,
    GroupList,
    GroupOut,
    MembersChange,
    MembersPage,
    Name,
    Tenant,
)
from notifyhub.services import apikeys, groups

router = APIRouter(prefix="/v1/admin", tags=["admin"])

TenantQuery = Annotated[Tenant, Query()]


@router.put(
    "/groups/{group}",
    response_model=GroupOut,
    responses={201: {"model": GroupOut, "description": "Created"}},
)
async def create_group(
    group: Name,
    principal: Admin,
    session: Session,
    response: Response,
    tenant: TenantQuery = "default",
) -> GroupOut:
    created = await groups.create_group(session, principal.own(tenant), group)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    found = await groups.get_group(session, tenant, group)
    return GroupOut(name=group, tenant=tenant, members=found.members)


@router.get("/groups/{group}", response_model=GroupOut)
async def get_group(
    group: Name, principal: Admin, session: Session, tenant: TenantQuery = "default"
) -> GroupOut:
    found = await groups.get_group(session, principal.own(tenant), group)
    return GroupOut(name=group, tenant=tenant, members=found.members)


@router.delete("/groups/{group}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_group(
    group: Name, principal: Admin, session: Session, tenant: TenantQuery = "default"
) -> Response:
    await groups.delete_group(session, principal.own(tenant), group)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/groups", response_model=GroupList)
async def list_groups(
    principal: Admin, session: Session, tenant: TenantQuery = "default"
) -> GroupList:
    found = await groups.list_groups(session, principal.own(tenant))
    return GroupList(
        groups=[GroupOut(name=g.name, tenant=tenant, members=g.members) for g in found]
    )


@router.post("/groups/{group}/members", response_model=GroupOut)
async def change_members(
    group: Name,
    body: MembersChange,
    principal: Admin,
    session: Session,
    tenant: TenantQuery = "default",
) -> GroupOut:
    changed = await groups.change_members(
        session, principal.own(tenant), group, add=body.add, remove=body.remove
    )
    return GroupOut(name=group, tenant=tenant, members=changed.members)


@router.get("/groups/{group}/members", response_model=MembersPage)
async def list_members(
    group: Name,
    principal: Admin,
    session: Session,
    tenant: TenantQuery = "default",
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> MembersPage:
    members, next_cursor = await groups.list_members(
        session, principal.own(tenant), group, cursor=cursor, limit=limit
    )
    return MembersPage(members=members, next_cursor=next_cursor)


@router.get("/api-keys", response_model=ApiKeyList)
async def list_api_keys(principal: Admin, session: Session) -> ApiKeyList:
    keys = await apikeys.list_keys(session)
    visible = [k for k in keys if principal.tenant is None or k.tenant == principal.tenant]
    return ApiKeyList(
        keys=[
            ApiKeyOut(
                name=k.name,
                scope=str(k.scope),
                tenant=k.tenant,
                created_at=k.created_at,
                revoked_at=k.revoked_at,
            )
            for k in visible
        ]
    )
