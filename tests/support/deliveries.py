"""Shared steps of the delivery tests: define, post, wait for a status."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

from notifyhub.domain.delivery import AlertTrigger
from notifyhub.services.deliveries import DefinitionSpec
from notifyhub.settings import DeliverySettings, Settings


def reaching_localhost(settings: Settings) -> Settings:
    """`settings` whose deliveries may reach a test's own receiver on 127.0.0.1."""
    deliveries = DeliverySettings(allow_networks=["127.0.0.1/32"])
    return settings.model_copy(update={"deliveries": deliveries})


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def webhook_spec(url: str, **changes: Any) -> DefinitionSpec:
    """A webhook definition as `DeliveryService.put_definition` takes it: a retry a
    second after one failure, no alerts, no confirmation, unless `changes` say otherwise."""
    spec: dict[str, Any] = {
        "url": url,
        "timeout_s": 5,
        "retry_intervals": "1s",
        "max_retries": 1,
        "alert_trigger": AlertTrigger.NEVER,
        "alert_after_n": None,
        "alert_emails": [],
        "alert_webhook_url": None,
        "need_confirm": False,
        "max_confirm_delay_s": 60,
    }
    return DefinitionSpec(**(spec | changes))


async def define(client: httpx.AsyncClient, admin_key: str, name: str, **body: Any) -> Any:
    response = await client.put(
        f"/v1/admin/delivery-definitions/{name}",
        json=body,
        headers={"Authorization": f"Bearer {admin_key}"},
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


def _tenant(tenant: str | None) -> dict[str, str]:
    return {} if tenant is None else {"tenant": tenant}


async def post(
    client: httpx.AsyncClient,
    publish_key: str,
    definition: str,
    payload: dict[str, Any],
    tenant: str | None = None,
) -> str:
    body = {"definition": definition, "payload": payload, "description": "test"}
    response = await client.post(
        "/v1/deliveries",
        json={**body, **_tenant(tenant)},
        headers={"Authorization": f"Bearer {publish_key}"},
    )
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "pending"
    return str(response.json()["id"])


async def get(
    client: httpx.AsyncClient, key: str, delivery_id: str, tenant: str | None = None
) -> Any:
    response = await client.get(
        f"/v1/deliveries/{delivery_id}",
        params=_tenant(tenant),
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 200, response.text
    return response.json()


async def wait_status(
    client: httpx.AsyncClient,
    key: str,
    delivery_id: str,
    status: str,
    timeout_s: float = 20.0,
    tenant: str | None = None,
) -> Any:
    """The delivery once it has `status`; a timeout says what it had instead (its status
    and attempts), so a failure shows where it stopped."""
    found: Any = None
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                found = await get(client, key, delivery_id, tenant)
                if found["status"] == status:
                    return found
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(
            f"delivery {delivery_id} not {status!r} after {timeout_s} s; it had: {found}"
        ) from None
