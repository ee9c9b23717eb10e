"""Admin API: API keys (list, create, revoke)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from notifyhub.api.audit import note_target
from notifyhub.api.deps import Admin, AppState, Unit
from notifyhub.api.openapi import CONFLICT, NOT_FOUND, SERVICE
from notifyhub.api.schemas.apikeys import ApiKeyCreated, ApiKeyIn, ApiKeyList, ApiKeyOut
from notifyhub.api.schemas.common import Name, Tenant
from notifyhub.db.unit import AfterCommit
from notifyhub.services import apikeys

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=SERVICE)

KeyNamePath = Annotated[Name, Path(description="The API key's name.", examples=["wms-consumer"])]


def _out(info: apikeys.ApiKeyInfo) -> ApiKeyOut:
    return ApiKeyOut(
        name=info.name,
        scope=str(info.scope),
        tenant=info.tenant,
        created_at=info.created_at,
        revoked_at=info.revoked_at,
    )


ListTenantQuery = Annotated[
    Tenant | None,
    Query(
        description="Only this tenant's keys (a key bound to another tenant: 403); "
        "omitted, every key the caller may see.",
        examples=["acme"],
    ),
]


@router.get("/api-keys", response_model=ApiKeyList)
async def list_api_keys(principal: Admin, unit: Unit, tenant: ListTenantQuery = None) -> ApiKeyList:
    """The API keys (a key bound to a tenant sees its tenant's only), or one tenant's."""
    only = principal.tenant if tenant is None else principal.own(tenant)
    keys = await apikeys.list_keys(unit.session)
    visible = [k for k in keys if only is None or k.tenant == only]
    return ApiKeyList(keys=[_out(k) for k in visible])


@router.post(
    "/api-keys",
    status_code=status.HTTP_201_CREATED,
    response_model=ApiKeyCreated,
    responses=CONFLICT,
)
async def create_api_key(body: ApiKeyIn, principal: Admin, unit: Unit) -> ApiKeyCreated:
    """Create a key; the answer carries its secret, shown this once. A tenant-bound admin
    key creates keys of its own tenant only (another tenant, or none: 403). Names are
    unique per tenant (and among hub-wide keys): a name the tenant has is a 409."""
    note_target(principal, body.name)
    made = await apikeys.issue_key(
        unit.session, principal, name=body.name, scope=body.scope, tenant=body.tenant
    )
    return ApiKeyCreated(**_out(made.info).model_dump(), key=made.key)


KeyTenantQuery = Annotated[
    Tenant | None,
    Query(
        description="The key's tenant. A tenant-bound admin key names its own (another: "
        "403); an unbound one, when omitted, the hub-wide key of that name, else the only "
        "key of that name (several tenants have one: 409).",
        examples=["acme"],
    ),
]


@router.delete(
    "/api-keys/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={**NOT_FOUND, **CONFLICT},
)
async def revoke_api_key(
    name: KeyNamePath,
    principal: Admin,
    state: AppState,
    unit: Unit,
    tenant: KeyTenantQuery = None,
) -> Response:
    """Revoke the key: every hub process refuses it at once, and the streams it opened
    (admin tails) end. Another tenant's key is a 404; revoking a revoked key again is a
    204 that changes nothing."""
    key_id = await apikeys.revoke_visible(unit.session, principal, name, tenant)
    unit.after_commit(_forget(state, key_id))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _forget(state: AppState, key_id: str) -> AfterCommit:
    async def forget() -> None:
        state["keys_cache"].forget(key_id)  # here at once, whatever Pub/Sub does
        await state["revocations"].announce_key(key_id)

    return forget
