"""Admin API: who a broadcast would reach, before it is sent (the console's composer)."""

from __future__ import annotations

from fastapi import APIRouter

from notifyhub.api.deps import Admin, AppState, Unit
from notifyhub.api.openapi import SERVICE
from notifyhub.api.schemas.notifications import RecipientsPreviewIn, RecipientsPreviewOut
from notifyhub.domain.notification import Recipients

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)

SAMPLE = 20


@router.post("/recipients", response_model=RecipientsPreviewOut)
async def preview_recipients(
    body: RecipientsPreviewIn, principal: Admin, state: AppState, unit: Unit
) -> RecipientsPreviewOut:
    """Resolve recipients as a publish would (users, group members, topic subscribers;
    unknown groups or topics and the recipient cap are the same 422s), sending nothing."""
    to = body.recipients
    recipients = Recipients(users=tuple(to.users), groups=tuple(to.groups), topics=tuple(to.topics))
    users = await state["ingest"].resolve(unit, principal, body.tenant, recipients)
    return RecipientsPreviewOut(tenant=body.tenant, users=len(users), sample=users[:SAMPLE])
