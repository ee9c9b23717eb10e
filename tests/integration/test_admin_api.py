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
    assert change.json() == {"name": "gpu", "tenant": "default", "members": 250}
    removed = await hub.client.post(
        "/v1/admin/groups/gpu/members", json={"remove": users[:50]}, headers=admin
    )
    assert removed.json()["members"] == 200
    again = await hub.client.put("/v1/admin/groups/gpu", headers=admin)
    assert again.json() == {"name": "gpu", "tenant": "default", "members": 200}

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


async def test_a_user_both_added_and_removed_is_refused(hub: Any, admin_key: str) -> None:
    """Which of the two would win is no one's guess: a 422 naming them, nothing changed."""
    admin = _auth(admin_key)
    await hub.client.put("/v1/admin/groups/bothways", headers=admin)
    await hub.client.post("/v1/admin/groups/bothways/members", json={"add": ["a"]}, headers=admin)
    change = {"add": ["a", "b"], "remove": ["a"]}
    refused = await hub.client.post("/v1/admin/groups/bothways/members", json=change, headers=admin)
    assert refused.status_code == 422
    assert refused.headers["content-type"] == "application/problem+json"
    assert "both added and removed: a" in refused.text
    page = await hub.client.get("/v1/admin/groups/bothways/members", headers=admin)
    assert page.json()["members"] == ["a"]


async def test_the_key_list_takes_a_tenant(hub: Any, admin_key: str, create_key: Any) -> None:
    """`?tenant=` lists that tenant's keys alone (the hub-wide key sees every tenant's)."""
    await create_key("acme-lister", "publish", "acme")
    await create_key("other-lister", "publish", "other")
    admin = _auth(admin_key)
    everyone = (await hub.client.get("/v1/admin/api-keys", headers=admin)).json()["keys"]
    assert {"acme", "other", None} <= {k["tenant"] for k in everyone}
    acme = await hub.client.get("/v1/admin/api-keys?tenant=acme", headers=admin)
    assert acme.status_code == 200
    assert {k["tenant"] for k in acme.json()["keys"]} == {"acme"}


async def test_groups_are_per_tenant(hub: Any, admin_key: str, create_key: Any) -> None:
    admin = _auth(admin_key)
    await hub.client.put("/v1/admin/groups/ops?tenant=acme", headers=admin)
    assert (await hub.client.get("/v1/admin/groups/ops/members", headers=admin)).status_code == 404
    bound = _auth(await create_key("acme-admin", "admin", "acme"))
    assert (await hub.client.get("/v1/admin/groups?tenant=acme", headers=bound)).status_code == 200
    assert (
        await hub.client.get("/v1/admin/groups?tenant=default", headers=bound)
    ).status_code == 403


async def test_get_one_group(hub: Any, admin_key: str, create_key: Any) -> None:
    admin = _auth(admin_key)
    created = await hub.client.put("/v1/admin/groups/pickers?tenant=acme", headers=admin)
    assert created.json() == {"name": "pickers", "tenant": "acme", "members": 0}
    body = {"add": ["ann", "ben", "ann"]}
    await hub.client.post("/v1/admin/groups/pickers/members?tenant=acme", json=body, headers=admin)

    found = await hub.client.get("/v1/admin/groups/pickers?tenant=acme", headers=admin)
    assert found.status_code == 200
    assert found.json() == {"name": "pickers", "tenant": "acme", "members": 2}
    # Another tenant's group of that name does not exist for the default tenant.
    elsewhere = await hub.client.get("/v1/admin/groups/pickers", headers=admin)
    assert elsewhere.status_code == 404
    assert elsewhere.headers["content-type"] == "application/problem+json"
    assert (
        await hub.client.get("/v1/admin/groups/nope?tenant=acme", headers=admin)
    ).status_code == 404

    acme = _auth(await create_key("acme-groups", "admin", "acme"))
    other = _auth(await create_key("other-groups", "admin", "other"))
    assert (await hub.client.get("/v1/admin/groups/pickers?tenant=acme", headers=acme)).json()[
        "members"
    ] == 2
    refused = await hub.client.get("/v1/admin/groups/pickers?tenant=acme", headers=other)
    assert refused.status_code == 403
    publisher = _auth(await create_key("acme-publisher", "publish", "acme"))
    assert (
        await hub.client.get("/v1/admin/groups/pickers?tenant=acme", headers=publisher)
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


async def test_a_members_cursor_with_control_characters_is_422(hub: Any, admin_key: str) -> None:
    """As every other list's cursor: a NUL once reached PostgreSQL (a 500)."""
    admin = _auth(admin_key)
    assert (await hub.client.put("/v1/admin/groups/gc", headers=admin)).status_code in (200, 201)
    for cursor in ("%00", "a%0Ab", "%C2%85"):
        page = await hub.client.get(f"/v1/admin/groups/gc/members?cursor={cursor}", headers=admin)
        assert page.status_code == 422, (cursor, page.text)
        assert page.headers["content-type"] == "application/problem+json"
    fine = await hub.client.get("/v1/admin/groups/gc/members?cursor=bob", headers=admin)
    assert fine.status_code == 200
