"""Reliable deliveries' HTTP API: definitions, outbox, confirm, replay.

Every definition and delivery belongs to one tenant (`default` unless named, as in the
rest of the API). A key bound to a tenant naming another gets 403; a delivery id of
another tenant is looked up in the named tenant only, so it answers 404 like an unknown id.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from notifyhub.api.deps import Admin, AppState, Publisher, Session, Unit
from notifyhub.api.openapi import CONFLICT, NOT_FOUND, SERVICE
from notifyhub.api.params import DefinitionPath, DeliveryIdPath, TenantQuery
from notifyhub.api.schemas.common import Tenant
from notifyhub.api.schemas.deliveries import (
    DefinitionIn,
    DefinitionOut,
    DeliveryAccepted,
    DeliveryIn,
    DeliveryOut,
)
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.delivery import DeliveryStatus
from notifyhub.errors import InvalidInput
from notifyhub.services.deliveries import DefinitionSpec

OptionalTenantQuery = Annotated[
    Tenant | None,
    Query(description="The definition's tenant, or `tenant` in the body.", examples=["default"]),
]

router = APIRouter(tags=["deliveries"], responses=SERVICE)


def _definition_tenant(body: DefinitionIn, query: str | None) -> str:
    """The body's `tenant`, or `?tenant=`: a PUT naming two different tenants is refused."""
    if query is None:
        return body.tenant
    if "tenant" in body.model_fields_set and body.tenant != query:
        raise InvalidInput(f"tenant: the body says {body.tenant!r}, the query {query!r}")
    return query


def _spec(body: DefinitionIn) -> DefinitionSpec:
    email = body.email.model_dump(exclude_defaults=True) if body.email else None
    return DefinitionSpec(
        url=body.url or "",
        kind=body.kind,
        email=email,
        rabbitmq=body.rabbitmq.model_dump() if body.rabbitmq else None,
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


# `secret` is absent unless shown (creation, rotation): unset fields are left out.
@router.put(
    "/v1/admin/delivery-definitions/{name}",
    response_model=DefinitionOut,
    response_model_exclude_unset=True,
    responses={201: {"model": DefinitionOut, "description": "Created"}},
)
async def put_definition(
    name: DefinitionPath,
    body: DefinitionIn,
    principal: Admin,
    session: Session,
    state: AppState,
    response: Response,
    tenant: OptionalTenantQuery = None,
) -> DefinitionOut:
    """Create (201, with its signing `secret`) or replace (200) a delivery definition;
    `rotate_secret` shows a new secret too. A URL the SSRF guard would always refuse is
    a 422 naming the setting that allows it."""
    owner = principal.own(_definition_tenant(body, tenant))
    shown, created = await state["deliveries"].put_definition(
        session, owner, name, _spec(body), body.rotate_secret, body.drop_previous_secret
    )
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return DefinitionOut.model_validate(shown)


@router.get(
    "/v1/admin/delivery-definitions/{name}",
    response_model=DefinitionOut,
    response_model_exclude_unset=True,
    responses=NOT_FOUND,
)
async def get_definition(
    name: DefinitionPath,
    principal: Admin,
    session: Session,
    state: AppState,
    tenant: TenantQuery = "default",
) -> DefinitionOut:
    """The definition (without its secret)."""
    found = await state["deliveries"].get_definition(session, principal.own(tenant), name)
    return DefinitionOut.model_validate(found)


@router.post(
    "/v1/deliveries",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeliveryAccepted,
    responses=CONFLICT,
)
async def create(body: DeliveryIn, principal: Publisher, state: AppState) -> DeliveryAccepted:
    """Send a webhook through a definition: 202 once the delivery is durable, then the
    first attempt; 409 when the definition is disabled (its receiver answered 410)."""
    # One autocommitted INSERT, durable before the 202; the send starts after it.
    tenant = principal.own(body.tenant)
    async with UnitOfWork(state["sessionmaker"], autocommit=True) as unit:
        delivery_id = await state["deliveries"].create(
            unit, tenant, body.definition, body.payload, body.description
        )
    return DeliveryAccepted(id=delivery_id, tenant=tenant, status=DeliveryStatus.PENDING.value)


@router.get("/v1/deliveries/{delivery_id}", response_model=DeliveryOut, responses=NOT_FOUND)
async def get(
    delivery_id: DeliveryIdPath,
    principal: Publisher,
    session: Session,
    state: AppState,
    tenant: TenantQuery = "default",
) -> DeliveryOut:
    """The delivery, its status and its attempts."""
    found = await state["deliveries"].get(session, principal.own(tenant), delivery_id)
    return DeliveryOut.model_validate(found)


@router.post(
    "/v1/deliveries/{delivery_id}/confirm",
    response_model=DeliveryOut,
    responses={**NOT_FOUND, **CONFLICT},
)
async def confirm(
    delivery_id: DeliveryIdPath,
    principal: Publisher,
    session: Session,
    state: AppState,
    tenant: TenantQuery = "default",
) -> DeliveryOut:
    """Confirm a delivery awaiting confirmation, or one of a `need_confirm` definition
    whose attempt is under way (a receiver confirming before it answers); 409 otherwise."""
    found = await state["deliveries"].confirm(session, principal.own(tenant), delivery_id)
    return DeliveryOut.model_validate(found)


@router.post(
    "/v1/deliveries/{delivery_id}/retry",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeliveryOut,
    responses=NOT_FOUND,
)
async def retry(
    delivery_id: DeliveryIdPath,
    principal: Admin,
    unit: Unit,
    state: AppState,
    tenant: TenantQuery = "default",
) -> DeliveryOut:
    """Send the delivery again now (a manual replay), whatever its status."""
    found = await state["deliveries"].retry(unit, principal.own(tenant), delivery_id)
    return DeliveryOut.model_validate(found)
