"""The audit hook on admin routes: every mutating request an admin key makes is recorded
(services/audit.py says where and why), by the `Admin` dependency itself, so a route
added later is audited by declaring who may call it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.exceptions import HTTPException as StarletteHTTPException

from notifyhub.api.errors import unreadable_body
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.auth import ServicePrincipal
from notifyhub.errors import NotifyhubError
from notifyhub.outages import outage_of
from notifyhub.services import audit

log = logging.getLogger(__name__)

READS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class AuditedPrincipal(ServicePrincipal):
    """An admin key's principal that remembers the tenants it was used on (every router
    names its tenant through `own`) and what the action named as its target."""

    acted_on: list[str] = field(default_factory=list, compare=False, hash=False)
    targets: list[str] = field(default_factory=list, compare=False, hash=False)

    def own(self, tenant: str) -> str:
        ServicePrincipal.own(self, tenant)
        self.acted_on.append(tenant)
        return tenant

    @classmethod
    def of(cls, principal: ServicePrincipal) -> AuditedPrincipal:
        return cls(principal.key_id, principal.name, principal.scope, principal.tenant)


def note_target(principal: ServicePrincipal, target: str) -> None:
    """Name the action's target when the route's path does not (a created key's name)."""
    if isinstance(principal, AuditedPrincipal):
        principal.targets.append(target)


def _status_of(exc: BaseException) -> int:
    if isinstance(exc, NotifyhubError):
        return exc.status
    if isinstance(exc, RequestValidationError):
        return 422
    if isinstance(exc, StarletteHTTPException):
        return 422 if unreadable_body(exc) is not None else exc.status_code
    return 503 if outage_of(exc) is not None else 500


def _action(request: Request, principal: AuditedPrincipal, status: int) -> audit.Action:
    route = request.scope.get("route")
    template = getattr(route, "path_format", None) or request.url.path
    path_target = "/".join(str(v) for v in request.path_params.values()) or None
    tenant = (principal.acted_on or [principal.tenant or audit.ALL_TENANTS])[-1]
    target = principal.targets[-1] if principal.targets else path_target
    return audit.Action(principal, tenant, request.method, template, target, status)


def _ok_status(request: Request, response: Response) -> int:
    if response.status_code:  # set by the handler (201 or 200)
        return response.status_code
    route = request.scope.get("route")
    return getattr(route, "status_code", None) or 200


@asynccontextmanager
async def audited(
    request: Request,
    response: Response,
    principal: ServicePrincipal,
    unit: UnitOfWork,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[ServicePrincipal]:
    """Yield the principal to the handler; record a mutating request's outcome: with the
    request's session when it succeeded (its unit commits both), apart when it failed,
    except when it failed on a store outage (503: logged, not recorded)."""
    if request.method in READS:
        yield principal
        return
    acting = AuditedPrincipal.of(principal)
    try:
        yield acting
    except Exception as exc:  # (a cancelled request rolls back and records nothing)
        if _status_of(exc) == 503:
            # A store is down: writing the entry would wait on the same outage (a hung
            # PostgreSQL once held the 503 past the client's 5 s). Logged instead.
            log.warning(
                "audit entry of %s %s not written: the action failed on an outage",
                request.method,
                request.url.path,
            )
            raise
        try:
            async with UnitOfWork(sessionmaker) as apart:
                await audit.record(apart.session, _action(request, acting, _status_of(exc)))
        except Exception:
            log.exception(
                "audit entry of a failed %s %s not written", request.method, request.url.path
            )
        raise
    await audit.record(unit.session, _action(request, acting, _ok_status(request, response)))
