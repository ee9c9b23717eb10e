"""Admin API: escalation, the tenants' default steps per category, and a user's pending
steps (issue 41; services/escalation.py). Its routes come before admin_users' (whose
`/users/{tenant}/{user:path}` would take `.../escalations` as part of a user id)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from notifyhub.api.deps import Admin, AppState, Session, Unit
from notifyhub.api.openapi import NOT_FOUND, SERVICE
from notifyhub.api.params import TenantQuery
from notifyhub.api.routers.admin_users import TenantPath, UserPath
from notifyhub.api.schemas.common import ULID_EXAMPLE, NotificationId
from notifyhub.api.schemas.escalation import (
    EscalationDefaultsIn,
    EscalationDefaultsOut,
    EscalationStepIn,
    PendingEscalation,
    PendingEscalations,
    steps_of,
)

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)

EscalationIdPath = Annotated[
    NotificationId,
    Path(
        description="The pending step's id (a ULID), as the user's list shows it.",
        examples=[ULID_EXAMPLE],
    ),
]


@router.get("/escalation-defaults", response_model=EscalationDefaultsOut)
async def get_escalation_defaults(
    principal: Admin, state: AppState, session: Session, tenant: TenantQuery = "default"
) -> EscalationDefaultsOut:
    """The tenant's default escalation steps, per category."""
    found = await state["escalations"].get_defaults(session, principal.own(tenant))
    categories = {
        c: [EscalationStepIn(**s.model_dump()) for s in steps] for c, steps in found.items()
    }
    return EscalationDefaultsOut(tenant=tenant, categories=categories)


@router.put(
    "/escalation-defaults",
    response_model=EscalationDefaultsOut,
    responses={201: {"model": EscalationDefaultsOut, "description": "Created"}},
)
async def put_escalation_defaults(
    body: EscalationDefaultsIn,
    principal: Admin,
    state: AppState,
    unit: Unit,
    response: Response,
    tenant: TenantQuery = "default",
) -> EscalationDefaultsOut:
    """Create (201: the tenant had none) or replace (200) the tenant's default escalation
    steps per category: a notification of that category that names no `escalate` of its
    own takes them (each hub process within a few seconds). A category with no steps is
    dropped."""
    wanted = {c: steps_of(s) for c, s in body.categories.items()}
    created = await state["escalations"].put_defaults(unit, principal.own(tenant), wanted)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    kept = {c: s for c, s in body.categories.items() if s}
    return EscalationDefaultsOut(tenant=tenant, categories=kept)


@router.get("/users/{tenant}/{user:path}/escalations", response_model=PendingEscalations)
async def user_escalations(
    tenant: TenantPath, user: UserPath, principal: Admin, state: AppState, session: Session
) -> PendingEscalations:
    """The user's escalation steps not run yet, the earliest first."""
    rows = await state["escalations"].pending(session, principal.own(tenant), user)
    return PendingEscalations(
        items=[
            PendingEscalation(
                id=r.id,
                notification_id=r.notification_id,
                step=r.step,
                channel=r.channel,
                unless=r.unless,
                due_at=r.due_at,
            )
            for r in rows
        ]
    )


@router.delete(
    "/users/{tenant}/{user:path}/escalations/{escalation_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=NOT_FOUND,
)
async def cancel_escalation(
    tenant: TenantPath,
    user: UserPath,
    escalation_id: EscalationIdPath,
    principal: Admin,
    state: AppState,
    session: Session,
) -> Response:
    """Cancel one of the user's pending steps (audited): it sends nothing. 404 when the
    user has no such pending step (run already, cancelled, or another user's)."""
    await state["escalations"].cancel(session, principal.own(tenant), user, escalation_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
