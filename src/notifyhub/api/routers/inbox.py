"""Inbox API: everything here is the caller's own, in the token's tenant."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response, status

from notifyhub.api.deps import AppState, CurrentUser
from notifyhub.api.schemas import (
    BulkRequest,
    Category,
    NotificationId,
    PatchRequest,
    ReadAllRequest,
    Time,
    Updated,
)
from notifyhub.domain.notification import Counts, InboxItem, InboxPage
from notifyhub.services.inbox import ListRequest

router = APIRouter(prefix="/v1/me/notifications", tags=["inbox"])
ULID_CURSOR = r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$"
"""Cursors are the ULID of the last item of the previous page."""


@router.get("", response_model=InboxPage)
async def list_notifications(
    me: CurrentUser,
    state: AppState,
    status_: Annotated[Literal["unread", "read", "all"], Query(alias="status")] = "all",
    category: Annotated[Category | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(pattern=ULID_CURSOR)] = None,
    since: Annotated[Time | None, Query()] = None,
) -> InboxPage:
    request = ListRequest(
        status=status_, category=category, limit=limit, cursor=cursor, since=since
    )
    return await state["inbox"].list(me, request)


@router.get("/counts", response_model=Counts)
async def counts(me: CurrentUser, state: AppState) -> Counts:
    return await state["inbox"].counts(me)


@router.post("/read-all", response_model=Updated)
async def read_all(me: CurrentUser, state: AppState, body: ReadAllRequest | None = None) -> Updated:
    body = body or ReadAllRequest()
    updated = await state["inbox"].read_all(me, category=body.category, before=body.before)
    return Updated(updated=updated)


@router.post("/bulk", response_model=Updated)
async def bulk(me: CurrentUser, state: AppState, body: BulkRequest) -> Updated:
    updated = await state["inbox"].bulk(
        me, body.ids, read=body.read, seen=bool(body.seen), delete=bool(body.delete)
    )
    return Updated(updated=updated)


@router.get("/{notification_id}", response_model=InboxItem)
async def get_notification(
    notification_id: NotificationId, me: CurrentUser, state: AppState
) -> InboxItem:
    return await state["inbox"].get(me, notification_id)


@router.patch("/{notification_id}", response_model=InboxItem)
async def patch_notification(
    notification_id: NotificationId, body: PatchRequest, me: CurrentUser, state: AppState
) -> InboxItem:
    return await state["inbox"].mark(me, notification_id, read=body.read, seen=bool(body.seen))


@router.delete("/{notification_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_notification(
    notification_id: NotificationId, me: CurrentUser, state: AppState
) -> Response:
    await state["inbox"].delete(me, notification_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
