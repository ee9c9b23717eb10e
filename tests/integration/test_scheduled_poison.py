"""A scheduled notification that can never be delivered is dropped, not retried forever."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _status(hub: Any, key: str, message_id: str) -> str:
    response = await hub.client.get(f"/v1/delayed/{message_id}", headers=_auth(key))
    assert response.status_code == 200, response.text
    return str(response.json()["status"])


async def test_a_schedule_whose_group_is_gone_is_dropped(
    hub: Any, admin_key: str, make_token: Any
) -> None:
    admin = _auth(admin_key)
    group, user = f"gone-{secrets.token_hex(3)}", f"later-{secrets.token_hex(3)}"
    assert (await hub.client.put(f"/v1/admin/groups/{group}", headers=admin)).status_code == 201
    members = {"add": ["someone"]}
    await hub.client.post(f"/v1/admin/groups/{group}/members", json=members, headers=admin)
    doomed = {"recipients": {"groups": [group]}, "title": "never", "delay": 1}
    first = await hub.client.post("/v1/notifications", json=doomed, headers=admin)
    assert first.status_code == 202, first.text
    assert (await hub.client.delete(f"/v1/admin/groups/{group}", headers=admin)).status_code == 204
    fine = {"recipients": {"users": [user]}, "title": "on time", "delay": 1}
    second = await hub.client.post("/v1/notifications", json=fine, headers=admin)
    assert second.status_code == 202

    async with asyncio.timeout(20):
        while await _status(hub, admin_key, first.json()["id"]) != "consumed":
            await asyncio.sleep(0.1)
        while await _status(hub, admin_key, second.json()["id"]) != "consumed":
            await asyncio.sleep(0.1)
    counts = await hub.client.get("/v1/me/notifications/counts", headers=_auth(make_token(user)))
    assert counts.json()["total"] == 1
    assert hub.app_state["runner"].stuck(60) == []
