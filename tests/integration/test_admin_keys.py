"""API keys over HTTP: created with their secret shown once, names unique, tenant-bound
admin keys confined to their tenant, names unique per tenant, and revoked keys refused in
every process at once."""

from __future__ import annotations

import asyncio
import secrets
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.base import Base
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.auth import Scope
from notifyhub.errors import Conflict
from notifyhub.services import apikeys
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


async def test_a_revoked_key_is_refused_here_and_elsewhere_at_once(
    hub: Any, settings: Settings, start_hub: Any, admin_key: str
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
        async with asyncio.timeout(1.0):  # the other: as soon as Pub/Sub tells it
            while await _consume(other.client, secret) != 401:
                await asyncio.sleep(0.02)
    again = await hub.client.delete(f"/v1/admin/api-keys/{name}", headers=_auth(admin_key))
    assert again.status_code == 204
    keys = (await hub.client.get("/v1/admin/api-keys", headers=_auth(admin_key))).json()["keys"]
    assert [k["revoked_at"] is not None for k in keys if k["name"] == name] == [True]


async def test_names_are_unique_per_tenant_and_revoked_by_tenant(
    hub: Any, create_key: Callable[..., Awaitable[str]], admin_key: str
) -> None:
    suffix = secrets.token_hex(3)
    a, b, name = f"na-{suffix}", f"nb-{suffix}", _name("same")
    admin_a = _auth(await create_key(f"adm-{a}", "admin", a))
    admin_b = _auth(await create_key(f"adm-{b}", "admin", b))
    url = "/v1/admin/api-keys"
    body = {"name": name, "scope": "consume"}
    made_a = await hub.client.post(url, json={**body, "tenant": a}, headers=admin_a)
    assert made_a.status_code == 201
    made_b = await hub.client.post(url, json={**body, "tenant": b}, headers=admin_b)
    assert made_b.status_code == 201, made_b.text  # nothing tells B that A has the name
    again = await hub.client.post(url, json={**body, "tenant": b}, headers=admin_b)
    assert again.status_code == 409
    assert b in again.json()["detail"] and a not in again.json()["detail"]
    # an unbound admin key must say which one it means
    ambiguous = await hub.client.delete(f"{url}/{name}", headers=_auth(admin_key))
    assert ambiguous.status_code == 409 and "tenant" in ambiguous.json()["detail"]
    # B's admin revokes B's key, and A's key of that name still works
    assert (await hub.client.delete(f"{url}/{name}", headers=admin_b)).status_code == 204
    assert await _consume(hub.client, made_b.json()["key"], b) == 401
    assert await _consume(hub.client, made_a.json()["key"], a) == 200
    # now only A's is active, but both rows exist: the unbound key still names the tenant
    named = await hub.client.delete(f"{url}/{name}?tenant={a}", headers=_auth(admin_key))
    assert named.status_code == 204
    assert await _consume(hub.client, made_a.json()["key"], a) == 401


async def test_hub_wide_key_names_are_unique_among_themselves(hub: Any, admin_key: str) -> None:
    url, name, admin = "/v1/admin/api-keys", _name("wide"), _auth(admin_key)
    first = await hub.client.post(url, json={"name": name, "scope": "consume"}, headers=admin)
    assert first.status_code == 201
    second = await hub.client.post(url, json={"name": name, "scope": "admin"}, headers=admin)
    assert second.status_code == 409 and "hub-wide" in second.json()["detail"]
    scoped = {"name": name, "scope": "consume", "tenant": f"t-{secrets.token_hex(3)}"}
    made = await hub.client.post(url, json=scoped, headers=_auth(admin_key))
    assert made.status_code == 201  # a tenant's key of that name is another key
    # without `tenant`, an unbound key names the hub-wide key of the name
    assert (await hub.client.delete(f"{url}/{name}", headers=_auth(admin_key))).status_code == 204
    assert await _consume(hub.client, first.json()["key"]) == 401
    assert await _consume(hub.client, made.json()["key"], scoped["tenant"]) == 200


def _drift(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    tables = ("api_keys", "token_revocations")
    found = compare_metadata(context, Base.metadata)
    return [d for d in found if any(table in repr(d) for table in tables)]


async def test_the_migrated_tables_match_the_models(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    async with sessionmaker() as session:
        connection = await session.connection()
        with warnings.catch_warnings():  # alembic skips expression indexes, with a warning
            warnings.simplefilter("ignore")
            assert await connection.run_sync(_drift) == []
        index = await session.scalar(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = 'uq_api_keys_tenant_name'")
        )
    assert index is not None and "UNIQUE" in index and "COALESCE(tenant" in index


async def test_a_taken_name_is_refused_and_the_unit_goes_on(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """A caller may try another name in the same unit: the refused one (no statement
    failed: the insert skips a taken name) leaves the unit usable, and the other commits."""
    taken, other = _name("taken"), _name("other")
    async with UnitOfWork(sessionmaker) as unit:
        await apikeys.create_key(unit.session, name=taken, scope=Scope.CONSUME, tenant=None)
        with pytest.raises(Conflict):
            await apikeys.create_key(unit.session, name=taken, scope=Scope.CONSUME, tenant=None)
        await apikeys.create_key(unit.session, name=other, scope=Scope.CONSUME, tenant=None)
    async with sessionmaker() as session:
        found = await session.scalars(
            text("SELECT name FROM api_keys WHERE name IN (:a, :b) ORDER BY name"),
            {"a": taken, "b": other},
        )
        assert sorted(found) == sorted([taken, other])
