"""API keys over HTTP: created with their secret shown once, names unique, tenant-bound
admin keys confined to their tenant, and revoked keys refused within the cache's bound."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from notifyhub.settings import Settings


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


async def _consume(client: httpx.AsyncClient, key: str, tenant: str = "default") -> int:
    """A consume-scoped call: 200 while the key is valid."""
    url = f"/v1/queues/q/messages?tenant={tenant}"
    return (await client.get(url, headers=_auth(key))).status_code


async def test_create_shows_the_secret_once_and_it_works(hub: Any, admin_key: str) -> None:
    name = _name("c")
    created = await hub.client.post(
        "/v1/admin/api-keys", json={"name": name, "scope": "consume"}, headers=_auth(admin_key)
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["name"] == name and body["scope"] == "consume" and body["tenant"] is None
    assert body["revoked_at"] is None and body["key"].startswith("nh_")
    assert await _consume(hub.client, body["key"]) == 200
    listed = (await hub.client.get("/v1/admin/api-keys", headers=_auth(admin_key))).json()
    mine = [k for k in listed["keys"] if k["name"] == name]
    assert len(mine) == 1 and "key" not in mine[0]
    # a consume key publishes nothing
    publish = {"recipients": {"users": ["u"]}, "title": "t"}
    refused = await hub.client.post("/v1/notifications", json=publish, headers=_auth(body["key"]))
    assert refused.status_code == 403


async def test_a_taken_name_is_409_and_bad_bodies_422(hub: Any, admin_key: str) -> None:
    body = {"name": _name("dup"), "scope": "publish", "tenant": "acme"}
    first = await hub.client.post("/v1/admin/api-keys", json=body, headers=_auth(admin_key))
    assert first.status_code == 201
    again = await hub.client.post("/v1/admin/api-keys", json=body, headers=_auth(admin_key))
    assert again.status_code == 409
    assert again.headers["content-type"] == "application/problem+json"
    for bad in (
        {**body, "name": _name("x"), "scope": "root"},
        {**body, "name": "white space"},
        {**body, "name": _name("x"), "extra": 1},
    ):
        answer = await hub.client.post("/v1/admin/api-keys", json=bad, headers=_auth(admin_key))
        assert answer.status_code == 422, bad


async def test_a_tenant_bound_admin_key_makes_keys_of_its_tenant_only(
    hub: Any, create_key: Callable[..., Awaitable[str]]
) -> None:
    bound = _auth(await create_key("acme-admin", "admin", "acme"))
    other = {"name": _name("o"), "scope": "admin", "tenant": "globex"}
    assert (
        await hub.client.post("/v1/admin/api-keys", json=other, headers=bound)
    ).status_code == 403
    unbound = {"name": _name("u"), "scope": "publish"}
    answer = await hub.client.post("/v1/admin/api-keys", json=unbound, headers=bound)
    assert answer.status_code == 403
    assert "unbound" in answer.json()["detail"]
    own = {"name": _name("own"), "scope": "consume", "tenant": "acme"}
    made = await hub.client.post("/v1/admin/api-keys", json=own, headers=bound)
    assert made.status_code == 201 and made.json()["tenant"] == "acme"
    assert await _consume(hub.client, made.json()["key"], "acme") == 200
    assert await _consume(hub.client, made.json()["key"], "globex") == 403


async def test_revoke_of_another_tenants_key_is_404(
    hub: Any, create_key: Callable[..., Awaitable[str]], admin_key: str
) -> None:
    victim = _name("victim")
    made = await hub.client.post(
        "/v1/admin/api-keys",
        json={"name": victim, "scope": "consume", "tenant": "globex"},
        headers=_auth(admin_key),
    )
    secret = made.json()["key"]
    bound = _auth(await create_key("acme-admin", "admin", "acme"))
    assert (
        await hub.client.delete(f"/v1/admin/api-keys/{victim}", headers=bound)
    ).status_code == 404
    missing = await hub.client.delete(f"/v1/admin/api-keys/{_name('none')}", headers=bound)
    assert missing.status_code == 404
    assert await _consume(hub.client, secret, "globex") == 200


async def test_a_revoked_key_is_refused_here_at_once_and_elsewhere_within_the_ttl(
    hub: Any,
    settings: Settings,
    start_hub: Any,
    admin_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = _name("rev")
    made = await hub.client.post(
        "/v1/admin/api-keys", json={"name": name, "scope": "consume"}, headers=_auth(admin_key)
    )
    secret = made.json()["key"]
    async with start_hub(settings) as other:  # another process: its own key cache
        assert await _consume(hub.client, secret) == 200
        assert await _consume(other.client, secret) == 200  # now cached there
        revoked = await hub.client.delete(f"/v1/admin/api-keys/{name}", headers=_auth(admin_key))
        assert revoked.status_code == 204
        assert await _consume(hub.client, secret) == 401  # the revoking process: at once
        cache = other.app_state["keys_cache"]
        assert await _consume(other.client, secret) == 200  # within the TTL: still cached
        ttl_s = settings.api_keys.cache_ttl_s
        now = cache.clock()
        monkeypatch.setattr(cache, "clock", lambda: now + ttl_s)
        assert await _consume(other.client, secret) == 401  # once the TTL has passed
    again = await hub.client.delete(f"/v1/admin/api-keys/{name}", headers=_auth(admin_key))
    assert again.status_code == 204
    keys = (await hub.client.get("/v1/admin/api-keys", headers=_auth(admin_key))).json()["keys"]
    assert [k["revoked_at"] is not None for k in keys if k["name"] == name] == [True]
