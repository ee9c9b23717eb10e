"""Reliable deliveries' HTTP API (Design 2): definitions, outbox, confirm, replay."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status

from notifyhub.api.delivery_schemas import DefinitionIn, DeliveryAccepted, DeliveryIn
from notifyhub.api.deps import Admin, AppState, Publisher, Session
from notifyhub.api.schemas import Name, NotificationId
from notifyhub.domain.delivery import DeliveryStatus
from notifyhub.services.deliveries import DefinitionSpec

DeliveryId = NotificationId
"""Delivery ids are ULIDs (also the `webhook-id` receivers see)."""

router = APIRouter(tags=["deliveries"])


def _spec(body: DefinitionIn) -> DefinitionSpec:
    return DefinitionSpec(
        url=body.url,
        timeout_s=body.timeout_s,
        retry_intervals=body.retry_intervals,
        max_retries=body.max_retries,
        alert_trigger=body.alert.trigger,
        alert_after_n=body.alert.after_n,
        alert_emails=list(body.alert.emails),
        alert_webhook_url=body.alert.webhook_url,
        need_confirm=body.need_confirm,
        max_confirm_delay_s=body.max_confirm_delay_s,
    )


@router.put("/v1/admin/delivery-definitions/{name}")
async def put_definition(
    name: Name,
    body: DefinitionIn,
    principal: Admin,
    session: Session,
    state: AppState,
    response: Response,
) -> dict[str, Any]:
    shown, created = await state["deliveries"].put_definition(
        session, name, _spec(body), body.rotate_secret, body.drop_previous_secret
    )
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return shown


@router.get("/v1/admin/delivery-definitions/{name}")
async def get_definition(
    name: Name, principal: Admin, session: Session, state: AppState
) -> dict[str, Any]:
    return await state["deliveries"].get_definition(session, name)


@router.post(
    "/v1/deliveries", status_code=status.HTTP_202_ACCEPTED, response_model=DeliveryAccepted
)
async def create(body: DeliveryIn, principal: Publisher, state: AppState) -> DeliveryAccepted:
    """202 once committed (the service's INSERT commits by itself before it returns);
    the at-once send starts after that commit."""
    delivery_id = await state["deliveries"].create(body.definition, body.payload, body.description)
    return DeliveryAccepted(id=delivery_id, status=DeliveryStatus.PENDING.value)


@router.get("/v1/deliveries/{delivery_id}")
async def get(
    delivery_id: DeliveryId, principal: Publisher, session: Session, state: AppState
) -> dict[str, Any]:
    return await state["deliveries"].get(session, delivery_id)


@router.post("/v1/deliveries/{delivery_id}/confirm")
async def confirm(
    delivery_id: DeliveryId, principal: Publisher, session: Session, state: AppState
) -> dict[str, Any]:
    return await state["deliveries"].confirm(session, delivery_id)


@router.post("/v1/deliveries/{delivery_id}/retry", status_code=status.HTTP_202_ACCEPTED)
async def retry(
    delivery_id: DeliveryId, principal: Admin, session: Session, state: AppState
) -> dict[str, Any]:
    return await state["deliveries"].retry(session, delivery_id)
