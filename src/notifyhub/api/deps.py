"""Typed lifespan state and the `Annotated[..., Depends(...)]` aliases handlers declare."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, TypedDict

from fastapi import Depends, Query, Request, Response
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from notifyhub.api.audit import audited
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.auth import Scope, ServicePrincipal, UserPrincipal
from notifyhub.errors import AuthenticationError, PermissionDenied
from notifyhub.metrics import Metrics
from notifyhub.realtime.clock import StreamClock
from notifyhub.realtime.hub import Hub
from notifyhub.realtime.reader import ChangeReader
from notifyhub.services import apikeys
from notifyhub.services.actions import ActionService
from notifyhub.services.delayed import DelayedService
from notifyhub.services.deliveries import DeliveryService
from notifyhub.services.durable import DurableInbox
from notifyhub.services.epoch import EpochWatch
from notifyhub.services.escalation import Escalations
from notifyhub.services.fanouts import Fanouts
from notifyhub.services.inbox import InboxService
from notifyhub.services.ingest import IngestService
from notifyhub.services.keycache import KeyCache
from notifyhub.services.preferences import PreferenceService
from notifyhub.services.profiles import Profiles
from notifyhub.services.push_subscriptions import PushSubscriptions
from notifyhub.services.quiet_hours import QuietHours, StreamQuiet
from notifyhub.services.revocations import Revocations
from notifyhub.services.rules import RuleService
from notifyhub.services.tokens import TokenService
from notifyhub.services.topics import TopicService
from notifyhub.services.users import UserLookup
from notifyhub.services.vapid import VapidKeys
from notifyhub.services.views import Views
from notifyhub.settings import Settings
from notifyhub.store.inbox import InboxStore
from notifyhub.store.ratelimit import RateLimiter
from notifyhub.store.traces import RoutingTraces
from notifyhub.workers.dispatcher import Dispatcher
from notifyhub.workers.runner import Runner


class State(TypedDict):
    """What the lifespan made (api/app.py), as every request sees it."""

    settings: Settings
    redis: Redis
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    store: InboxStore
    hub: Hub
    clock: StreamClock
    reader: ChangeReader
    tokens: TokenService
    keys_cache: KeyCache
    revocations: Revocations
    ingest: IngestService
    inbox: InboxService
    views: Views
    routing_traces: RoutingTraces
    fanouts: Fanouts
    durable: DurableInbox | None
    """Durable inbox mode's log; None in the default Redis-only mode."""
    topics: TopicService
    rules: RuleService
    preferences: PreferenceService
    delayed: DelayedService
    metrics: Metrics
    runner: Runner
    deliveries: DeliveryService
    dispatcher: Dispatcher
    limiter: RateLimiter
    users: UserLookup
    actions: ActionService
    vapid: VapidKeys
    push_subscriptions: PushSubscriptions
    profiles: Profiles
    quiet: QuietHours
    quiet_streams: StreamQuiet
    escalations: Escalations
    epoch: EpochWatch
    """Notices Redis losing data and rebuilds it; `/readyz` asks it whether it has."""


async def _state(request: Request) -> State:
    return request.scope["state"]  # type: ignore[no-any-return]


AppState = Annotated[State, Depends(_state)]


async def _unit(state: AppState) -> AsyncIterator[UnitOfWork]:
    """One unit of work per request: committed on success (then its after-commit work
    runs), rolled back on error. Its session opens on first use only."""
    async with UnitOfWork(state["sessionmaker"]) as unit:
        yield unit


# scope="function": commit before the response is sent, so a 2xx means committed
# (the default "request" scope would commit after the client already has its answer).
Unit = Annotated[UnitOfWork, Depends(_unit, scope="function")]


async def _session(unit: Unit) -> AsyncSession:
    """The request unit's session: a handler declaring both gets one transaction."""
    return unit.session


Session = Annotated[AsyncSession, Depends(_session)]


async def bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        raise AuthenticationError("send `Authorization: Bearer <token>`")
    return credentials.strip()


Bearer = Annotated[str, Depends(bearer)]


AUTHENTICATED = "notifyhub.service_principal"
"""Scope key: the API key's principal, already authenticated and rate-limited."""


async def _service(state: State, presented: str) -> ServicePrincipal:
    """The key's principal (from the key cache, which outlives a PostgreSQL outage for
    keys it knows), rate-limited."""

    async def check() -> ServicePrincipal:
        async with state["sessionmaker"]() as session:
            return await apikeys.authenticate(session, presented)

    principal = await state["keys_cache"].verify(presented, check)
    await state["limiter"].check_key(principal)
    return principal


async def authenticate_service(request: Request, scope: Scope) -> ServicePrincipal:
    """`require(scope)` outside FastAPI: the principal is kept in the request scope."""
    principal = await require(scope)(request)
    request.scope[AUTHENTICATED] = principal
    return principal


@functools.cache
def require(scope: Scope) -> Callable[..., Awaitable[ServicePrincipal]]:
    """A dependency admitting API keys with `scope` (admin keys admit everything).

    One dependency taking the request, not a chain of small ones: every service call
    passes here, and FastAPI's cost grows with each dependency it solves. Made once
    per scope (the publish fast path asks for it on every request)."""

    async def check(request: Request) -> ServicePrincipal:
        principal: ServicePrincipal | None = request.scope.get(AUTHENTICATED)
        if principal is None:  # (a fast path that handed the request on has checked it)
            principal = await _service(request.scope["state"], await bearer(request))
        if not principal.allows(scope):
            raise PermissionDenied(f"this API key lacks the `{scope}` scope")
        return principal

    return check


Publisher = Annotated[ServicePrincipal, Depends(require(Scope.PUBLISH))]


async def _admin(
    request: Request,
    response: Response,
    unit: Unit,
    principal: Annotated[ServicePrincipal, Depends(require(Scope.ADMIN))],
) -> AsyncIterator[ServicePrincipal]:
    """An admin key, whose mutating requests are written to the audit log (api/audit.py)."""
    state: State = request.scope["state"]
    async with audited(request, response, principal, unit, state["sessionmaker"]) as acting:
        yield acting


# scope="function": the audit entry is added before the request's unit commits
Admin = Annotated[ServicePrincipal, Depends(_admin, scope="function")]


async def _user(state: AppState, presented: Bearer) -> UserPrincipal:
    principal = state["revocations"].check(state["tokens"].verify_user_token(presented))
    await state["limiter"].check_user(principal)
    return principal


CurrentUser = Annotated[UserPrincipal, Depends(_user)]


async def stream_user(
    request: Request,
    state: AppState,
    access_token: Annotated[
        str | None,
        Query(
            description="A stream token (`POST /v1/me/stream-tokens`), for clients that "
            "cannot send an Authorization header (EventSource).",
            examples=["eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"],
        ),
    ] = None,
) -> UserPrincipal:
    """The stream accepts a stream token in the query, or a user JWT in the header."""
    if access_token is not None:
        principal = state["tokens"].verify_stream_token(access_token)
    else:
        principal = state["tokens"].verify_user_token(await bearer(request))
    state["revocations"].check(principal)
    await state["limiter"].check_user(principal)
    return principal


StreamUser = Annotated[UserPrincipal, Depends(stream_user)]
