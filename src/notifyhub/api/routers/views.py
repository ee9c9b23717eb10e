"""Inbox views (tabs): the tenant's, which an admin defines for every user of the tenant
(`/v1/admin/views`), and each user's own (`/v1/me/views`). Their counts come with the
user's (`counts.views`), their lists with `GET /v1/me/notifications?view=`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from notifyhub.api.deps import Admin, AppState, CurrentUser, Unit
from notifyhub.api.openapi import CONFLICT, NOT_FOUND, SERVICE, USER
from notifyhub.api.paging import CursorQuery, LimitQuery
from notifyhub.api.params import TenantQuery
from notifyhub.api.schemas.views import ViewFilterIn, ViewIn, ViewList, ViewName, ViewOut
from notifyhub.domain.views import Scope, View, ViewFilter
from notifyhub.errors import NotFound

admin = APIRouter(prefix="/v1/admin/views", tags=["admin"], responses=SERVICE)
me = APIRouter(prefix="/v1/me/views", tags=["inbox"], responses=USER)

ViewPath = Annotated[
    ViewName, Path(description="The view's name (a lowercase slug).", examples=["mentions"])
]


def _view(name: str, body: ViewIn, scope: Scope) -> View:
    f: ViewFilterIn = body.filter
    wanted = ViewFilter(
        tuple(f.categories), tuple(f.tags_any), tuple(f.tags_all), f.severity_at_least
    )
    return View(name, wanted, scope, body.label, datetime.now(UTC))


def _out(view: View) -> ViewOut:
    return ViewOut(
        name=view.name,
        label=view.label,
        filter=view.filter.to_json(),
        scope=view.scope,
        updated_at=view.updated_at,
    )


def _created(response: Response, created: bool) -> None:
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK


# ---- the tenant's views ----------------------------------------------------------------


@admin.get("", response_model=ViewList)
async def list_tenant_views(
    principal: Admin,
    state: AppState,
    unit: Unit,
    tenant: TenantQuery = "default",
    cursor: CursorQuery = None,
    limit: LimitQuery = 100,
) -> ViewList:
    """The tenant's views by name, a page at a time (as every admin list; a tenant has at
    most 10 views)."""
    found = await state["views"].list_tenant(unit.session, principal.own(tenant))
    after = [v for v in found.views if cursor is None or v.name > cursor]
    page = after[:limit]
    more = len(after) > limit
    return ViewList(views=[_out(v) for v in page], next_cursor=page[-1].name if more else None)


@admin.get("/{name}", response_model=ViewOut, responses=NOT_FOUND)
async def get_tenant_view(
    name: ViewPath, principal: Admin, state: AppState, unit: Unit, tenant: TenantQuery = "default"
) -> ViewOut:
    """One of the tenant's views."""
    found = await state["views"].list_tenant(unit.session, principal.own(tenant))
    return _out(_named(found.views, name, f"no view {name} in tenant {tenant}"))


@admin.put(
    "/{name}",
    response_model=ViewOut,
    responses={**CONFLICT, 201: {"description": "Created", "model": ViewOut}},
)
async def put_tenant_view(
    name: ViewPath,
    body: ViewIn,
    principal: Admin,
    state: AppState,
    unit: Unit,
    response: Response,
    tenant: TenantQuery = "default",
) -> ViewOut:
    """Create (201) or replace (200) a view every user of the tenant gets (at most 10: a
    409 naming the limit). Users' counts of it are recomputed in the background
    (`notifyhub_view_recompute_*` in /metrics); until a user's are, they are marked
    `exact: false`, and that user's next read of counts or of the view recomputes them
    first. A user's own view of the same name is hidden by it."""
    view = _view(name, body, "tenant")
    _created(response, await state["views"].put_tenant(unit, principal.own(tenant), view))
    return _out(view)


@admin.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_tenant_view(
    name: ViewPath, principal: Admin, state: AppState, unit: Unit, tenant: TenantQuery = "default"
) -> Response:
    """Delete one of the tenant's views (its counts leave users' counts in the background)."""
    await state["views"].delete_tenant(unit, principal.own(tenant), name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# ---- the user's views ------------------------------------------------------------------


@me.get("", response_model=ViewList)
async def list_my_views(me_: CurrentUser, state: AppState, unit: Unit) -> ViewList:
    """The views the user has: the tenant's (`scope: tenant`), then their own."""
    return ViewList(views=[_out(v) for v in await state["views"].of_user(unit.session, me_)])


@me.put(
    "/{name}",
    response_model=ViewOut,
    responses={**CONFLICT, 201: {"description": "Created", "model": ViewOut}},
)
async def put_my_view(
    name: ViewPath,
    body: ViewIn,
    me_: CurrentUser,
    state: AppState,
    unit: Unit,
    response: Response,
) -> ViewOut:
    """Create (201) or replace (200) one of the user's own views (at most 10; a name the
    tenant's views use is a 409). Its counts are exact when this answers."""
    view = _view(name, body, "personal")
    _created(response, await state["views"].put_own(unit, me_, view))
    return _out(view)


@me.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_my_view(name: ViewPath, me_: CurrentUser, state: AppState, unit: Unit) -> Response:
    """Delete one of the user's own views."""
    await state["views"].delete_own(unit, me_, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _named(views: tuple[View, ...], name: str, missing: str) -> View:
    for view in views:
        if view.name == name:
            return view
    raise NotFound(missing)
