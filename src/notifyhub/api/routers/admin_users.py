"""Admin API: one user as the hub holds them."""

from __future__ import annotations

import functools
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response, status

from notifyhub.api.deps import Admin, AppState, Session, Unit
from notifyhub.api.openapi import SERVICE
from notifyhub.api.params import TenantQuery
from notifyhub.api.routers.inbox import PageCursor, PageLimit
from notifyhub.api.routers.stream import STREAM_CONTENT, open_stream
from notifyhub.api.schemas.common import Tenant, UserId
from notifyhub.api.schemas.preferences import (
    CategoryPreferenceIn,
    PreferenceDefaultsIn,
    PreferenceDefaultsOut,
    PreferencesIn,
)
from notifyhub.api.schemas.quiet import QuietOut
from notifyhub.api.schemas.rules import SubscriptionOut
from notifyhub.api.schemas.users import TokensRevoked, UserOut, UserProfileIn, UserProfileOut
from notifyhub.db.repositories import quiet as quiet_repo
from notifyhub.domain.auth import UserPrincipal
from notifyhub.domain.notification import InboxPage
from notifyhub.errors import AuthenticationError
from notifyhub.realtime.sse import InboxStream
from notifyhub.services.inbox import ListRequest

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)

TenantPath = Annotated[
    Tenant,
    Path(description="The user's tenant; a key bound to another gets 403.", examples=["default"]),
]
UserQuery = Annotated[
    UserId,
    Query(description="The user id, as the calling application knows it.", examples=["alice"]),
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
    quiet = await state["quiet"].view(unit.session, found.tenant, user)
    preferences = PreferencesIn(
        categories={c: CategoryPreferenceIn.of(p) for c, p in found.preferences.items()},
        locale=found.locale,
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
        email=found.email,
        locale=found.locale,
        time_zone=found.time_zone,
        quiet=QuietOut(
            schedule=quiet.schedule,
            source=quiet.source,
            time_zone=quiet.time_zone,
            quiet_now=quiet.quiet_now,
            until=quiet.until,
        ),
    )


@router.put(
    "/users/{tenant}/{user:path}",
    response_model=UserProfileOut,
    responses={201: {"model": UserProfileOut, "description": "Created"}},
)
async def put_user_profile(
    body: UserProfileIn,
    tenant: TenantPath,
    user: UserPath,
    principal: Admin,
    state: AppState,
    unit: Unit,
    response: Response,
) -> UserProfileOut:
    """Set how to reach the user beyond their inbox: `email` (e-mail deliveries of their
    notifications), `locale` (the same as their own `PUT /v1/me/preferences` sets) and
    `time_zone` (an IANA name), `quiet` (their own quiet hours: e-mails and pushes wait
    until a window ends; null: the tenant's default). A field left out stays as it is;
    null clears it. The
    tenant is in the path, as in the `GET` (a key bound to another tenant gets 403).
    201 when the user had no addresses stored yet, else 200."""
    tenant = principal.own(tenant)
    changes = {name: getattr(body, name) for name in body.model_fields_set - {"quiet"}}
    found, created = await state["profiles"].put(unit.session, tenant, user, changes)
    if "quiet" in body.model_fields_set:
        await quiet_repo.put_user(unit.session, tenant, user, body.quiet)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return UserProfileOut(
        tenant=tenant,
        user=user,
        email=found.email,
        locale=found.locale,
        time_zone=found.time_zone,
        quiet=await quiet_repo.of_user(unit.session, tenant, user),
    )


@router.get("/inbox", response_model=InboxPage)
async def user_inbox(
    user: UserQuery,
    principal: Admin,
    state: AppState,
    tenant: TenantQuery = "default",
    status_: Annotated[
        Literal["unread", "read", "all", "archived", "snoozed"],
        Query(alias="status", description="As `GET /v1/me/notifications`.", examples=["all"]),
    ] = "all",
    limit: PageLimit = 20,
    cursor: PageCursor = None,
) -> InboxPage:
    """The user's inbox as they see it in `GET /v1/me/notifications` (pinned first, then
    newest first), read without changing it: nothing is marked seen or read."""
    me = UserPrincipal(principal.own(tenant), user)
    request = ListRequest(status=status_, limit=limit, cursor=cursor)
    return await state["inbox"].list(me, request)


@router.get(
    "/tail",
    response_class=InboxStream,
    status_code=200,
    responses={
        200: {
            "description": "The user's event stream, as `GET /v1/me/stream` sends it.",
            "content": STREAM_CONTENT,
        }
    },
)
async def user_tail(
    user: UserQuery, principal: Admin, state: AppState, tenant: TenantQuery = "default"
) -> InboxStream:
    """A live tail of the user's events (Server-Sent Events, the same events their own
    streams get, from now on: a `counts` event first). It counts as one of the user's open
    streams (429 at their cap), so a tail cannot be used to open unbounded streams."""
    tenant = principal.own(tenant)
    if state["keys_cache"].revoked(principal.key_id):  # revoked while this request waited
        raise AuthenticationError("invalid API key")
    return open_stream(state, tenant, user, None, key_id=principal.key_id)


@router.post("/users/{tenant}/{user:path}/revoke-tokens", response_model=TokensRevoked)
async def revoke_user_tokens(
    tenant: TenantPath, user: UserPath, principal: Admin, state: AppState, unit: Unit
) -> TokensRevoked:
    """Refuse the user's tokens issued until now (their `iat` at or before this second, or
    none) and stream tokens made from them, in every hub process at once (401), and end
    their streams opened with such tokens (their admin tails stay). The user signs in
    again for a new token. For a leaked token, or a user removed from the tenant."""
    tenant = principal.own(tenant)
    revocations = state["revocations"]
    not_before = await revocations.revoke_user(unit.session, tenant, user)
    unit.after_commit(functools.partial(revocations.announce_user, tenant, user, not_before))
    return TokensRevoked(tenant=tenant, user=user, not_before=not_before)


@router.get("/preference-defaults", response_model=PreferenceDefaultsOut)
async def get_preference_defaults(
    principal: Admin, state: AppState, session: Session, tenant: TenantQuery = "default"
) -> PreferenceDefaultsOut:
    """The tenant's default preferences, per category and channel."""
    found = await state["preferences"].defaults(session, principal.own(tenant))
    categories = {c: CategoryPreferenceIn.of(p) for c, p in found.items()}
    return PreferenceDefaultsOut(tenant=tenant, categories=categories)


@router.put(
    "/preference-defaults",
    response_model=PreferenceDefaultsOut,
    responses={201: {"model": PreferenceDefaultsOut, "description": "Created"}},
)
async def put_preference_defaults(
    body: PreferenceDefaultsIn,
    principal: Admin,
    state: AppState,
    session: Session,
    response: Response,
    tenant: TenantQuery = "default",
) -> PreferenceDefaultsOut:
    """Create (201: the tenant had none) or replace (200) the tenant's default
    preferences: for a user without preferences of their own for a category, these decide
    its e-mails and Web Pushes (the inbox and live events follow users' own preferences
    only; severity `critical` bypasses opt-outs)."""
    wanted = {c: p.preference() for c, p in body.categories.items()}
    created = await state["preferences"].set_defaults(session, principal.own(tenant), wanted)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return PreferenceDefaultsOut(tenant=tenant, categories=body.categories)
