"""Admin API: one user as the hub holds them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from notifyhub.api.admin_schemas import UserOut
from notifyhub.api.deps import Admin, AppState, Unit
from notifyhub.api.openapi import SERVICE
from notifyhub.api.schemas import (
    CategoryPreferenceIn,
    PreferencesIn,
    SubscriptionOut,
    Tenant,
    UserId,
)

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)

TenantPath = Annotated[
    Tenant,
    Path(description="The user's tenant; a key bound to another gets 403.", examples=["default"]),
]
UserPath = Annotated[
    UserId,
    Path(description="The user id, as the calling application knows it.", examples=["alice"]),
]


@router.get("/users/{tenant}/{user:path}", response_model=UserOut)
async def lookup_user(
    tenant: TenantPath, user: UserPath, principal: Admin, state: AppState, unit: Unit
) -> UserOut:
    """The user's inbox counts and last change seq, streams open now across every hub
    process, preferences, rule subscriptions, groups and topics. User ids are the calling
    application's: one the hub never heard of answers empty (zero counts, no groups), not 404."""
    found = await state["users"].lookup(unit.session, principal.own(tenant), user)
    preferences = PreferencesIn(
        categories={
            c: CategoryPreferenceIn(inbox=p.inbox, push=p.push)
            for c, p in found.preferences.items()
        }
    )
    return UserOut(
        tenant=found.tenant,
        user=found.user,
        counts=found.counts,
        seq=found.seq,
        streams_open=found.streams_open,
        preferences=preferences,
        subscriptions=[
            SubscriptionOut(
                rule=s.rule, target=s.target, relationship=s.relationship, obtain=s.obtain
            )
            for s in found.subscriptions
        ],
        groups=found.groups,
        topics=found.topics,
    )
