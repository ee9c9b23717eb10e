"""Admin API: groups and members, API key listing, and tenant-bound admin keys."""

from __future__ import annotations

from typing import Any


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_group_lifecycle(hub: Any, admin_key: str) -> None:
    admin = _auth(admin_key)
    assert (await hub.client.put("/v1/admin/groups/gpu", headers=admin)).status_code == 201
    assert (await hub.client.put("/v1/admin/groups/gpu", headers=admin)).status_code == 200
    users = [f"user-{i:03d}" for i in range(250)]
    change = await hub.client.post(
        "/v1/admin/groups/gpu/members", json={"add": users}, headers=admin
    )
    assert change.status_code == 200
    await hub.client.post(
        "/v1/admin/groups/gpu/members", json={"remove": users[:50]}, headers=admin
    )

    listed: list[str] = []
    cursor = None
    while True:
        params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = (
            await hub.client.get("/v1/admin/groups/gpu/members", params=params, headers=admin)
        ).json()
        listed += page["members"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert listed == users[50:]

    groups = (await hub.client.get("/v1/admin/groups", headers=admin)).json()["groups"]
    assert {"name": "gpu", "tenant": "default", "members": 200} in groups
    assert (await hub.client.delete("/v1/admin/groups/gpu", headers=admin)).status_code == 204
    assert (await hub.client.delete("/v1/admin/groups/gpu", headers=admin)).status_code == 404
    missing = await hub.client.post(
        "/v1/admin/groups/gpu/members", json={"add": ["x"]}, headers=admin
    )
    assert missing.status_code == 404


async def test_groups_are_per_tenant(hub: Any, admin_key: str, create_key: Any) -> None:
    admin = _auth(admin_key)
    await hub.client.put("/v1/admin/groups/ops?tenant=acme", headers=admin)
    assert (await hub.client.get("/v1/admin/groups/ops/members", headers=admin)).status_code == 404
    bound = _auth(await create_key("acme-admin", "admin", "acme"))
    assert (await hub.client.get("/v1/admin/groups?tenant=acme", headers=bound)).status_code == 200
    assert (
        await hub.client.get("/v1/admin/groups?tenant=default", headers=bound)
    ).status_code == 403


async def test_api_key_list_never_shows_keys(hub: Any, admin_key: str) -> None:
    response = await hub.client.get("/v1/admin/api-keys", headers=_auth(admin_key))
    assert response.status_code == 200
    keys = response.json()["keys"]
    assert any(k["scope"] == "admin" for k in keys)
    assert admin_key not in response.text
    assert all(set(k) == {"name", "scope", "tenant", "created_at", "revoked_at"} for k in keys)


async def test_bad_group_names_are_422(hub: Any, admin_key: str) -> None:
    response = await hub.client.put("/v1/admin/groups/bad%20name", headers=_auth(admin_key))
    assert response.status_code == 422
