"""The caller's Web Push: the hub's VAPID key to subscribe with, and their browsers'
subscriptions (the user and tenant are the verified token's, never the body's)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Header, Path, Response, status

from notifyhub.api.deps import AppState, CurrentUser, Session
from notifyhub.api.openapi import CONFLICT, NOT_FOUND, USER
from notifyhub.api.schemas.push import (
    PushKeyOut,
    PushSubscriptionIn,
    PushSubscriptionList,
    PushSubscriptionOut,
)
from notifyhub.db.repositories.push_subscriptions import NewSubscription, PushSubscriptionRow

router = APIRouter(prefix="/v1/me", tags=["push"], responses=USER)

MAX_USER_AGENT = 300
SubscriptionId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=26,
        pattern=r"^[0-9A-Za-z]+$",  # a ULID; a NUL byte would reach PostgreSQL
        description="A subscription's id, as its registration answered.",
        examples=["01JD3Q4M6T9W2Z8K5N7R1C0B3X"],
    ),
]


def _out(row: PushSubscriptionRow) -> PushSubscriptionOut:
    return PushSubscriptionOut(
        id=row.id,
        endpoint=row.endpoint,
        created_at=row.created_at,
        expiration_time=row.expiration_time,
        user_agent=row.user_agent,
    )


@router.get("/push-key", response_model=PushKeyOut)
async def push_key(me: CurrentUser, state: AppState) -> PushKeyOut:
    """The hub's VAPID public key, what `pushManager.subscribe({userVisibleOnly: true,
    applicationServerKey})` needs. The same for every user and every hub process."""
    return PushKeyOut(public_key=await state["vapid"].public_key())


@router.post(
    "/push-subscriptions",
    response_model=PushSubscriptionOut,
    status_code=status.HTTP_201_CREATED,
    responses=CONFLICT,
)
async def add_push_subscription(
    body: PushSubscriptionIn,
    me: CurrentUser,
    state: AppState,
    session: Session,
    user_agent: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> PushSubscriptionOut:
    """Register a browser's push subscription (its `PushSubscription.toJSON()`), so
    notifications can reach it while no page of yours is open. The same endpoint again
    updates it (keys, expiry) and answers its first id: call it on every page load. A
    user holds at most 10 (409 for the eleventh)."""
    expires = body.expirationTime
    new = NewSubscription(
        endpoint=body.endpoint,
        p256dh=body.keys.p256dh,
        auth=body.keys.auth,
        expiration_time=None if expires is None else datetime.fromtimestamp(expires / 1000, UTC),
        user_agent=user_agent[:MAX_USER_AGENT] if user_agent else None,
    )
    row, _ = await state["push_subscriptions"].add(session, me, new)
    return _out(row)


@router.get("/push-subscriptions", response_model=PushSubscriptionList)
async def list_push_subscriptions(
    me: CurrentUser, state: AppState, session: Session
) -> PushSubscriptionList:
    """The caller's push subscriptions, oldest first."""
    found = await state["push_subscriptions"].list(session, me)
    return PushSubscriptionList(subscriptions=[_out(row) for row in found])


@router.delete(
    "/push-subscriptions/{subscription_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=NOT_FOUND,
)
async def remove_push_subscription(
    subscription_id: SubscriptionId, me: CurrentUser, state: AppState, session: Session
) -> Response:
    """Remove one of the caller's push subscriptions (on sign-out, or when the browser's
    `unsubscribe()` ran). Another user's id answers 404, like an id nobody has."""
    await state["push_subscriptions"].remove(session, me, subscription_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
