"""Admin API: a notification's routing trace, "why did (or didn't) user X get it?"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from notifyhub.api.deps import Admin, AppState
from notifyhub.api.openapi import NOT_FOUND, SERVICE
from notifyhub.api.params import NotificationIdPath, TenantQuery
from notifyhub.api.schemas.common import UserId
from notifyhub.api.schemas.traces import TraceLineOut, TraceNow, TraceOut, TracePlacing
from notifyhub.domain.notification import from_ms
from notifyhub.errors import NotFound

router = APIRouter(prefix="/v1/admin/notifications", tags=["admin"], responses=SERVICE)


@router.get("/{notification_id}/trace", response_model=TraceOut, responses=NOT_FOUND)
async def get_trace(
    notification_id: NotificationIdPath,
    principal: Admin,
    state: AppState,
    tenant: TenantQuery = "default",
    user: Annotated[
        UserId | None,
        Query(
            description="One recipient's line, and their copy as it stands now.", examples=["bob"]
        ),
    ] = None,
) -> TraceOut:
    """What routing decided for each recipient of a notification of the tenant: where it
    was reached from (named directly, or which group, topic, rule or producer), delivered
    (with the user's change seq, and the copy it replaced by collapse key or the oldest
    ones a full inbox evicted for it), left pending, already held, or dropped by the
    user's preferences, and how many live streams were sent its event; a recall; with
    `?user=`, that user's copy now (in the inbox, read, archived, snoozed; whether the
    notification's expiry has passed, judged now) and their open streams. Kept for
    `routing_trace_ttl_s` (7 days), in Redis; a notification of another tenant, or none,
    is a 404."""
    tenant = principal.own(tenant)
    streamed = state["hub"].streamed
    if streamed is not None:  # this process's latest stream counts, not a second late
        await streamed.flush()
    trace = await state["routing_traces"].read(notification_id, user=user)
    if trace is None or trace.meta.get("tenant") != tenant:
        raise NotFound(f"no routing trace of notification {notification_id} in tenant {tenant}")
    meta = trace.meta
    lines = [
        TraceLineOut(
            user=line.user,
            source=line.source,
            outcome=line.outcome.value,
            seq=line.seq,
            replaced=line.replaced,
            evicted=list(line.evicted),
            streamed_to=line.streamed_to,
            channels=dict(line.channels),
        )
        for line in trace.lines
    ]
    expires_at = datetime.fromisoformat(meta["expires_at"])
    progress = await state["fanouts"].progress(notification_id)
    placing = TracePlacing(users=progress.users, placed=progress.placed) if progress else None
    now = None
    if user is not None:
        item = await state["store"].get(tenant, user, notification_id)
        now = TraceNow(
            in_inbox=item is not None,
            status=item.status if item is not None else None,
            archived=item.archived if item is not None else None,
            snoozed_until=item.snoozed_until if item is not None else None,
            expired=expires_at <= datetime.now(UTC),
            streams_open=await state["users"].streams_open(tenant, user),
        )
    return TraceOut(
        id=notification_id,
        tenant=tenant,
        created_at=datetime.fromisoformat(meta["created_at"]),
        expires_at=expires_at,
        category=meta.get("category"),
        origin=meta["origin"],
        named=meta["named"],
        resolved=meta["resolved"],
        outcomes=meta["outcomes"],
        recorded=meta["recorded"],
        recalled_at=from_ms(trace.recalled_ms) if trace.recalled_ms else None,
        placing=placing,
        lines=lines,
        now=now,
    )
