"""Admin API: API keys (list, create, revoke)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from notifyhub.api.admin_schemas import ApiKeyCreated, ApiKeyIn
from notifyhub.api.audit import note_target
from notifyhub.api.deps import Admin, AppState, Unit
from notifyhub.api.openapi import CONFLICT, NOT_FOUND, SERVICE
from notifyhub.api.schemas import ApiKeyList, ApiKeyOut, Name
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


@router.get("/api-keys", response_model=ApiKeyList)
async def list_api_keys(principal: Admin, unit: Unit) -> ApiKeyList:
    """The API keys (a key bound to a tenant sees its tenant's only)."""
    keys = await apikeys.list_keys(unit.session)
    visible = [k for k in keys if principal.tenant is None or k.tenant == principal.tenant]
    return ApiKeyList(keys=[_out(k) for k in visible])


@router.post(
    "/api-keys",
    status_code=status.HTTP_201_CREATED,
    response_model=ApiKeyCreated,
    responses=CONFLICT,
)
async def create_api_key(body: ApiKeyIn, principal: Admin, unit: Unit) -> ApiKeyCreated:
    """Create a key; the answer carries its secret, shown this once. A tenant-bound admin
    key creates keys of its own tenant only (another tenant, or none: 403); a name in
    use is a 409."""
    note_target(principal, body.name)
    made = await apikeys.issue_key(
        unit.session, principal, name=body.name, scope=body.scope, tenant=body.tenant
    )
    return ApiKeyCreated(**_out(made.info).model_dump(), key=made.key)


@router.delete("/api-keys/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def revoke_api_key(
    name: KeyNamePath, principal: Admin, state: AppState, unit: Unit
) -> Response:
    """Revoke the key: this process refuses it at once, every other within the key
    cache's TTL (`NOTIFYHUB_API_KEYS__CACHE_TTL_S`, 30 s). Another tenant's key is a 404;
    revoking a revoked key again is a 204 that changes nothing."""
    await apikeys.revoke_visible(unit.session, principal, name)
    unit.after_commit(_forget(state, name))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _forget(state: AppState, name: str) -> AfterCommit:
    async def forget() -> None:
        state["keys_cache"].forget(name)

    return forget
