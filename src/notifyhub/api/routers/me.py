"""The caller's preferences and rule subscriptions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from notifyhub.api.deps import AppState, CurrentUser, Session
from notifyhub.api.openapi import NOT_FOUND, USER
from notifyhub.api.paging import LimitQuery
from notifyhub.api.schemas.preferences import CategoryPreferenceIn, PreferencesIn
from notifyhub.api.schemas.rules import SubscriptionCancel, SubscriptionList, SubscriptionOut
from notifyhub.services import subscriptions
from notifyhub.services.preferences import CategoryPreference

router = APIRouter(prefix="/v1/me", tags=["inbox"], responses=USER)

SubscriptionCursor = Annotated[
    str | None,
    Query(
        max_length=subscriptions.MAX_CURSOR,  # a target id alone may be 200 characters
        pattern=subscriptions.CURSOR,  # what the list gives: the schema says its shape
        description="The previous page's `next_cursor`; omit for the first page.",
        examples=["comment_created_post/p-981/follower"],
    ),
]


def _out(prefs: dict[str, CategoryPreference], locale: str | None) -> PreferencesIn:
    return PreferencesIn(
        categories={c: CategoryPreferenceIn.of(p) for c, p in prefs.items()},
        locale=locale,
    )


@router.get("/preferences", response_model=PreferencesIn)
async def get_preferences(me: CurrentUser, state: AppState, session: Session) -> PreferencesIn:
    """The user's per-category preferences and language."""
    preferences = state["preferences"]
    return _out(await preferences.get(session, me), await preferences.locale(session, me))


@router.put("/preferences", response_model=PreferencesIn)
async def put_preferences(
    body: PreferencesIn, me: CurrentUser, state: AppState, session: Session
) -> PreferencesIn:
    """Set the user's preferences: `categories` replaces them all, a switch per channel
    (`push: false` keeps a category in the inbox without live events or Web Push;
    `email: false` sends it no e-mail; `inbox: false` drops it; severity `critical`
    bypasses all three); `locale` picks rules' and producers' translations (null clears it). A
    field left out stays as it is."""
    preferences = state["preferences"]
    given = body.model_fields_set
    if "categories" in given:
        wanted = {c: p.preference() for c, p in body.categories.items()}
        categories = await preferences.put(session, me, wanted)  # holds the user's turn
    else:
        categories = await preferences.get(session, me)
    if "locale" in given:
        await preferences.set_locale(session, me, body.locale)
        return _out(categories, body.locale)
    return _out(categories, await preferences.locale(session, me))


@router.get("/subscriptions", response_model=SubscriptionList)
async def list_subscriptions(
    me: CurrentUser,
    state: AppState,
    session: Session,
    cursor: SubscriptionCursor = None,
    limit: LimitQuery = 100,
) -> SubscriptionList:
    """The user's rule subscriptions (Design 3) by rule, target id and relationship, a page
    at a time (as every list: `cursor` from the previous page's `next_cursor`)."""
    found, next_cursor = await subscriptions.read(state["rules"], session, me, cursor, limit)
    return SubscriptionList(
        subscriptions=[
            SubscriptionOut(
                rule=s.rule, target=s.target, relationship=s.relationship, obtain=s.obtain
            )
            for s in found
        ],
        next_cursor=next_cursor,
    )


@router.delete("/subscriptions", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def cancel_subscription(
    body: SubscriptionCancel, me: CurrentUser, state: AppState, session: Session
) -> Response:
    """Cancel one rule subscription."""
    await state["rules"].cancel(session, me, body.rule, body.target)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
