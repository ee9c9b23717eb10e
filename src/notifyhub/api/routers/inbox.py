"""Inbox API: everything here is the caller's own, in the token's tenant."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response, status

from notifyhub.api.deps import AppState, CurrentUser
from notifyhub.api.openapi import CONFLICT, NOT_FOUND, USER
from notifyhub.api.params import ActionIdPath, NotificationIdPath
from notifyhub.api.schemas.common import MAX_TAGS, Category, Tag, Time
from notifyhub.api.schemas.inbox import BulkRequest, PatchRequest, ReadAllRequest, Updated
from notifyhub.api.schemas.views import ViewName
from notifyhub.domain.notification import (
    PRINTABLE,
    ActivityPage,
    Counts,
    InboxItem,
    InboxPage,
    Severity,
)
from notifyhub.services.inbox import ListRequest, StateChange

router = APIRouter(prefix="/v1/me/notifications", tags=["inbox"], responses=USER)
ULID_CURSOR = r"^(pin\.)?[0-7][0-9A-HJKMNP-TV-Z]{25}$"
"""Cursors are the ULID of the last item of the previous page (`pin.` and it when that
page ended among the pinned items)."""
PageLimit = Annotated[
    int, Query(ge=1, le=100, description="Notifications per page.", examples=[20])
]
PageCursor = Annotated[
    str | None,
    Query(
        pattern=ULID_CURSOR,
        description="The previous page's `next_cursor`; omit for the first page.",
        examples=["01JD3Q4M6T9W2Z8K5N7R1C0B3X"],
    ),
]
"""An inbox list's paging (`GET /v1/me/notifications`, and an admin's read of it)."""


@router.get("", response_model=InboxPage)
async def list_notifications(
    me: CurrentUser,
    state: AppState,
    status_: Annotated[
        Literal["unread", "read", "all", "archived", "snoozed"],
        Query(
            alias="status",
            description="Which notifications: `all`, `unread` and `read` leave the archived "
            "and snoozed out; `archived` lists only the archived, `snoozed` the snoozed.",
            examples=["unread"],
        ),
    ] = "all",
    category: Annotated[
        Category | None, Query(description="Only this category.", examples=["restock"])
    ] = None,
    limit: PageLimit = 20,
    cursor: PageCursor = None,
    since: Annotated[
        Time | None,
        Query(
            description="Only notifications created after this time (RFC 3339 or epoch "
            "milliseconds), oldest first: a polling client's catch-up.",
            examples=["2026-11-20T09:15:02.113Z"],
        ),
    ] = None,
    pinned: Annotated[
        bool | None,
        Query(
            description="`true`: only the pinned notifications; `false`: only the "
            "unpinned ones. Omitted: the pinned ones first, then the others.",
            examples=[True],
        ),
    ] = None,
    tags_any: Annotated[
        list[Tag] | None,
        Query(
            max_length=MAX_TAGS,
            description="Only notifications with at least one of these tags (repeat it).",
            examples=[["mention", "billing"]],
        ),
    ] = None,
    tags_all: Annotated[
        list[Tag] | None,
        Query(
            max_length=MAX_TAGS,
            description="Only notifications with every one of these tags (repeat it).",
            examples=[["billing"]],
        ),
    ] = None,
    severity_at_least: Annotated[
        Literal["info", "success", "warning", "error", "critical"] | None,
        Query(
            description="Only this severity or a higher one (info < success < warning < "
            "error < critical).",
            examples=["warning"],
        ),
    ] = None,
    actor: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            pattern=PRINTABLE,
            description="Only notifications whose `actor.id` is this.",
            examples=["u-7"],
        ),
    ] = None,
    created_after: Annotated[
        Time | None,
        Query(
            description="Only notifications created after this time (RFC 3339 or epoch ms).",
            examples=["2026-11-20T00:00:00Z"],
        ),
    ] = None,
    created_before: Annotated[
        Time | None,
        Query(
            description="Only notifications created before this time (RFC 3339 or epoch ms).",
            examples=["2026-11-21T00:00:00Z"],
        ),
    ] = None,
    view: Annotated[
        ViewName | None,
        Query(
            description="Only the notifications in this view (tab): the tenant's or the "
            "user's own (`GET /v1/me/views`); its counts are `counts.views[view]`. A view "
            "the user does not have is a 422.",
            examples=["mentions"],
        ),
    ] = None,
) -> InboxPage:
    """The user's notifications, newest first (oldest first with `since`), a page at a
    time, with the unread count. Archived ones only with `status=archived`. In the
    newest-first list the pinned ones come first, then the others; a page holds at
    most `limit` notifications, pinned ones included, and paging on with `next_cursor`
    lists each notification once. A notification back from a snooze sorts (and
    `since`, `created_after` and `created_before` take it) as of when it came back: at
    the top. A scheduled one (`delay`/`deliver_at`) sorts as of its delivery, which its
    `created_at` shows (its id was made at the publish): a `since` poll gets it once,
    after what arrived before it; so does a broadcast's copy written after its `202`
    (`NOTIFYHUB_LIMITS__DEFER_FANOUT_AT` users or more), as of when it was written.
    Filters combine (all must hold). A page looks at no more than
    `NOTIFYHUB_LIMITS__LIST_SCAN_BUDGET` notifications (2,000): with filters few match,
    it may hold fewer than `limit`, even none, and still have a `next_cursor` to follow."""
    request = ListRequest(
        status=status_,
        category=category,
        limit=limit,
        cursor=cursor,
        since=since,
        pinned=pinned,
        tags_any=tuple(tags_any or ()),
        tags_all=tuple(tags_all or ()),
        severity_at_least=Severity(severity_at_least) if severity_at_least else None,
        actor=actor,
        created_after=created_after,
        created_before=created_before,
        view=view,
    )
    return await state["inbox"].list(me, request)


@router.get("/counts", response_model=Counts)
async def counts(me: CurrentUser, state: AppState) -> Counts:
    """The user's unread, unseen and total counts, and each view's (`views`)."""
    return await state["inbox"].counts(me)


@router.post("/read-all", response_model=Updated)
async def read_all(me: CurrentUser, state: AppState, body: ReadAllRequest | None = None) -> Updated:
    """Mark every unread notification read (optionally of a category, older ones, or
    those in a view: what the view's list shows; given together, all must hold). Archived
    and snoozed ones are marked too. Every stream of the user gets an `update` per
    notification marked, and the counts (the views' included) follow."""
    body = body or ReadAllRequest()
    inbox = state["inbox"]
    updated = await inbox.read_all(me, category=body.category, before=body.before, view=body.view)
    return Updated(updated=updated)


@router.post("/archive-all", response_model=Updated)
async def archive_all(
    me: CurrentUser, state: AppState, body: ReadAllRequest | None = None
) -> Updated:
    """Archive every notification not archived yet (optionally of a category, older
    ones, or those in a view, as for read-all): they leave the default list and the
    counts."""
    body = body or ReadAllRequest()
    updated = await state["inbox"].read_all(
        me, category=body.category, before=body.before, view=body.view, action="archive"
    )
    return Updated(updated=updated)


@router.post("/bulk", response_model=Updated)
async def bulk(me: CurrentUser, state: AppState, body: BulkRequest) -> Updated:
    """Mark up to 100 notifications read, unread or seen, archive or unarchive them, or
    delete them."""
    updated = await state["inbox"].bulk(
        me,
        body.ids,
        read=body.read,
        seen=bool(body.seen),
        delete=bool(body.delete),
        archived=body.archived,
    )
    return Updated(updated=updated)


@router.get("/{notification_id}", response_model=InboxItem, responses=NOT_FOUND)
async def get_notification(
    notification_id: NotificationIdPath, me: CurrentUser, state: AppState
) -> InboxItem:
    """One of the user's notifications."""
    return await state["inbox"].get(me, notification_id)


@router.patch("/{notification_id}", response_model=InboxItem, responses={**NOT_FOUND, **CONFLICT})
async def patch_notification(
    notification_id: NotificationIdPath, body: PatchRequest, me: CurrentUser, state: AppState
) -> InboxItem:
    """Mark the notification read, unread or seen, archive, pin or snooze it (or undo
    any); the answer is the updated copy. Pinning past the limit (20) is a 409 naming it;
    a snooze in the past or more than 90 days ahead is a 422."""
    change = StateChange(
        read=body.read,
        seen=bool(body.seen),
        archived=body.archived,
        pinned=body.pinned,
        snooze_until_ms=body.snooze_until_ms(datetime.now(UTC)),
        unsnooze=body.unsnoozes,
    )
    return await state["inbox"].mark(me, notification_id, change)


@router.get("/{notification_id}/activities", response_model=ActivityPage, responses=NOT_FOUND)
async def list_activities(
    notification_id: NotificationIdPath,
    me: CurrentUser,
    state: AppState,
    limit: PageLimit = 20,
    cursor: PageCursor = None,
) -> ActivityPage:
    """Every activity of a thread (the latest 100 are kept), the latest first, each as it
    was published; a single notification's is itself."""
    return await state["inbox"].activities(me, notification_id, cursor=cursor, limit=limit)


@router.post(
    "/{notification_id}/actions/{action_id}",
    response_model=InboxItem,
    responses={**NOT_FOUND, **CONFLICT},
)
async def complete_action(
    notification_id: NotificationIdPath,
    action_id: ActionIdPath,
    me: CurrentUser,
    state: AppState,
) -> InboxItem:
    """Complete one of the notification's actions: the answer is the copy, read, with
    `completed` set, and every stream of the user gets an `update` carrying it. The
    actions are one choice: once one is completed, any further call is a 409 whose
    `completed` names the first (`action`, `completed_at`, `completed_by`). An action
    with a `webhook` enqueues one signed delivery to that definition
    (`type: "action.completed"`, with the user, notification and action). An action the
    notification does not have is a 404."""
    return await state["actions"].complete(me, notification_id, action_id)


@router.delete("/{notification_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def delete_notification(
    notification_id: NotificationIdPath, me: CurrentUser, state: AppState
) -> Response:
    """Delete the notification from the user's inbox."""
    await state["inbox"].delete(me, notification_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
