"""Reliable deliveries are tenant-isolated: two tenants, keys bound to each, real hub.

The attacks of issue 16: an admin key of tenant A reading and re-pointing B's delivery
definition; a key of A reading B's delivery, confirming or replaying it, or posting on
B's definition. Naming another tenant is 403; another tenant's delivery id is 404, word
for word like an unknown id; a definition name is per tenant.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, func, inspect, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from ulid import ULID

from notifyhub.db.base import Base
from notifyhub.db.models import Delivery, DeliveryDefinition, DeliveryHistory
from notifyhub.db.unit import UnitOfWork
from notifyhub.errors import InvalidInput
from notifyhub.services import signing
from notifyhub.services.deliveries import DeliveryService, enqueue
from notifyhub.services.outbound import AddressGuard
from notifyhub.services.targets import TargetCheck
from notifyhub.settings import DeliverySettings, Settings
from support.deliveries import define, get, post, unique, wait_status, webhook_spec
from support.receiver import Receiver, Reply

Maker = async_sessionmaker[AsyncSession]
DELIVERY_TABLES = ("delivery_definitions", "deliveries", "delivery_history", "delivery_alerts")
ROUTES = {"get": ("GET", ""), "confirm": ("POST", "/confirm"), "retry": ("POST", "/retry")}
"""The routes that take a delivery id: method and path after `/v1/deliveries/{id}`."""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    deliveries = DeliverySettings(
        allow_networks=["127.0.0.1/32"], dispatcher_interval_s=0.05, jitter=0.0
    )
    return settings.model_copy(update={"deliveries": deliveries})


@dataclass(frozen=True)
class Tenant:
    name: str
    admin: str
    publish: str


@pytest.fixture
async def tenants(create_key: Callable[..., Awaitable[str]]) -> tuple[Tenant, Tenant]:
    """Two fresh tenants, each with an admin key and a publish key bound to it."""
    made = []
    for label in ("ta", "tb"):
        name = unique(label)
        admin = await create_key(f"{name}-admin", "admin", name)
        made.append(Tenant(name, admin, await create_key(f"{name}-publish", "publish", name)))
    return made[0], made[1]


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _stored(sessionmaker: Maker, tenant: str, name: str) -> tuple[str, str]:
    async with sessionmaker() as session:
        row = await session.get(DeliveryDefinition, {"tenant": tenant, "name": name})
        assert row is not None
        return row.url, row.secret


def _same_as_unknown(response: httpx.Response, target: str, baseline: httpx.Response) -> None:
    """A 404 for another tenant's id reads exactly like the one for an id nobody has."""
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/problem+json"
    unknown = baseline.request.url.path.split("/")[3]
    assert response.text.replace(target, "?") == baseline.text.replace(unknown, "?")


async def test_an_admin_key_of_a_cannot_read_or_repoint_bs_definition(
    hub: Any,
    admin_key: str,
    tenants: tuple[Tenant, Tenant],
    receiver: Receiver,
    sessionmaker: Maker,
) -> None:
    a, b = tenants
    name = unique("orders")
    path = f"/v1/admin/delivery-definitions/{name}"
    await define(hub.client, b.admin, name, tenant=b.name, url=receiver.url("/b"))
    before = await _stored(sessionmaker, b.name, name)
    attacker = receiver.url("/attacker")

    for params in ({"tenant": b.name}, {}):  # naming B, or the default tenant: not A's
        response = await hub.client.get(path, params=params, headers=_auth(a.admin))
        assert response.status_code == 403, response.text
    own = await hub.client.get(path, params={"tenant": a.name}, headers=_auth(a.admin))
    assert own.status_code == 404 and receiver.url("/b") not in own.text
    for params, body in (
        ({}, {"tenant": b.name}),
        ({"tenant": b.name}, {}),
        ({}, {}),  # no tenant: the default one, not A's
    ):
        repoint = {"url": attacker, "rotate_secret": True, **body}
        response = await hub.client.put(path, params=params, json=repoint, headers=_auth(a.admin))
        assert response.status_code == 403, response.text

    assert await _stored(sessionmaker, b.name, name) == before
    seen = await hub.client.get(path, params={"tenant": b.name}, headers=_auth(admin_key))
    assert seen.status_code == 200  # an unbound key acts on the tenant it names
    assert (seen.json()["tenant"], seen.json()["url"]) == (b.name, receiver.url("/b"))


async def test_a_key_of_a_cannot_see_confirm_or_replay_bs_delivery(
    hub: Any,
    admin_key: str,
    tenants: tuple[Tenant, Tenant],
    receiver: Receiver,
) -> None:
    a, b = tenants
    name = unique("confirm")
    await define(
        hub.client,
        b.admin,
        name,
        tenant=b.name,
        url=receiver.url("/b"),
        need_confirm=True,
        max_confirm_delay_s=600,
    )
    secret_payload = {"card": "4111-secret"}
    delivery_id = await post(hub.client, b.publish, name, secret_payload, tenant=b.name)
    await wait_status(hub.client, b.publish, delivery_id, "awaiting_confirm", tenant=b.name)
    unknown = str(ULID())

    async def call(route: str, target: str, key: str, params: dict[str, str]) -> httpx.Response:
        method, suffix = ROUTES[route]
        url = f"/v1/deliveries/{target}{suffix}"
        return await hub.client.request(method, url, params=params, headers=_auth(key))

    for route, key in (
        ("get", a.publish),
        ("get", a.admin),
        ("confirm", a.publish),
        ("confirm", a.admin),
        ("retry", a.admin),  # (retry needs the admin scope)
    ):
        own = {"tenant": a.name}
        response = await call(route, delivery_id, key, own)
        _same_as_unknown(response, delivery_id, await call(route, unknown, key, own))
        assert "4111" not in response.text
        for foreign in ({"tenant": b.name}, {}):  # B, or the default tenant: not A's
            assert (await call(route, delivery_id, key, foreign)).status_code == 403
    for route in ROUTES:  # even an unbound key finds it only in the tenant it names
        response = await call(route, delivery_id, admin_key, {})
        _same_as_unknown(response, delivery_id, await call(route, unknown, admin_key, {}))

    found = await get(hub.client, b.publish, delivery_id, tenant=b.name)
    assert (found["tenant"], found["status"], found["payload"]) == (
        b.name,
        "awaiting_confirm",
        secret_payload,
    )
    assert len(found["attempts"]) == 1 and len(receiver.at("/b")) == 1


async def test_a_key_of_a_cannot_post_on_bs_definition(
    hub: Any, tenants: tuple[Tenant, Tenant], receiver: Receiver, sessionmaker: Maker
) -> None:
    a, b = tenants
    name = unique("only-b")
    await define(hub.client, b.admin, name, tenant=b.name, url=receiver.url("/b"))

    def body(**tenant: str) -> dict[str, Any]:
        return {"definition": name, "payload": {"n": 1}, **tenant}

    for key in (a.publish, a.admin):
        for tenant, expected in (({"tenant": b.name}, 403), ({}, 403), ({"tenant": a.name}, 422)):
            response = await hub.client.post(
                "/v1/deliveries", json=body(**tenant), headers=_auth(key)
            )
            assert response.status_code == expected, (tenant, response.text)
        assert "no delivery definition" in response.json()["detail"]  # A has no such name

    async with sessionmaker() as session:
        count = select(func.count()).where(Delivery.definition == name)
        assert (await session.execute(count)).scalar_one() == 0
    assert receiver.at("/b") == []


async def test_the_same_name_in_two_tenants_keeps_its_own_url_secret_and_alerts(
    hub: Any, tenants: tuple[Tenant, Tenant], receiver: Receiver
) -> None:
    """Each delivery goes to its own tenant's URL, signed with its secret, on the at-once
    send and on the dispatcher's retry (a first 500 each), and alerts its own tenant."""
    name = unique("shared")
    secrets: dict[str, str] = {}
    ids: dict[str, list[str]] = {}
    for tenant, path in zip(tenants, ("/a", "/b"), strict=True):
        receiver.plan(path, Reply(500))
        created = await define(
            hub.client,
            tenant.admin,
            name,
            tenant=tenant.name,
            url=receiver.url(path),
            retry_intervals="1s",
            alert={"trigger": "every_failure", "webhook_url": receiver.url(f"{path}-alerts")},
        )
        assert (created["tenant"], created["url"]) == (tenant.name, receiver.url(path))
        secrets[path] = created["secret"]
    assert secrets["/a"] != secrets["/b"]

    for tenant, path in zip(tenants, ("/a", "/b"), strict=True):
        ids[path] = [
            await post(hub.client, tenant.publish, name, {"to": path, "i": i}, tenant=tenant.name)
            for i in range(3)
        ]
    for tenant, path in zip(tenants, ("/a", "/b"), strict=True):
        for delivery_id in ids[path]:
            found = await wait_status(
                hub.client, tenant.publish, delivery_id, "sent", tenant=tenant.name
            )
            assert found["tenant"] == tenant.name

    now_s = int(time.time())
    for tenant, path in zip(tenants, ("/a", "/b"), strict=True):
        arrived = receiver.at(path)
        assert {r.headers["webhook-id"] for r in arrived} == set(ids[path])
        assert len(arrived) == 4  # one 500, then each of the three sent
        assert all(json.loads(r.body)["to"] == path for r in arrived)
        assert all(signing.verify(secrets[path], r.headers, r.body, now_s) for r in arrived)
        [alert] = await receiver.wait_for(f"{path}-alerts", 1)
        assert json.loads(alert.body)["tenant"] == tenant.name
        assert json.loads(alert.body)["delivery_id"] in ids[path]
        assert signing.verify(secrets[path], alert.headers, alert.body, now_s)


async def test_a_410_disables_only_its_own_tenants_definition(
    hub: Any, tenants: tuple[Tenant, Tenant], receiver: Receiver
) -> None:
    a, b = tenants
    name = unique("gone")
    receiver.plan("/a", default=Reply(410))
    await define(hub.client, a.admin, name, tenant=a.name, url=receiver.url("/a"))
    await define(hub.client, b.admin, name, tenant=b.name, url=receiver.url("/b"))
    gone = await post(hub.client, a.publish, name, {"n": 1}, tenant=a.name)
    await wait_status(hub.client, a.publish, gone, "final_failed", tenant=a.name)

    refused = await hub.client.post(
        "/v1/deliveries",
        json={"tenant": a.name, "definition": name, "payload": {}},
        headers=_auth(a.publish),
    )
    assert refused.status_code == 409
    still = await post(hub.client, b.publish, name, {"n": 2}, tenant=b.name)
    await wait_status(hub.client, b.publish, still, "sent", tenant=b.name)


async def _archived(sessionmaker: Maker, delivery_id: str) -> bool:
    async with sessionmaker() as session:
        return await session.get(DeliveryHistory, delivery_id) is not None


async def test_a_replay_from_history_needs_the_deliverys_tenant(
    hub: Any, tenants: tuple[Tenant, Tenant], receiver: Receiver, sessionmaker: Maker
) -> None:
    a, b = tenants
    name = unique("archived")
    await define(hub.client, b.admin, name, tenant=b.name, url=receiver.url("/b"))
    delivery_id = await post(hub.client, b.publish, name, {"n": 1}, tenant=b.name)
    await wait_status(hub.client, b.publish, delivery_id, "sent", tenant=b.name)
    dispatcher = hub.app_state["dispatcher"]
    dispatcher._settings = dispatcher._settings.model_copy(update={"history_after_s": 0})
    async with asyncio.timeout(20):  # batch by batch: other tests left finished rows too
        while not await _archived(sessionmaker, delivery_id):
            await dispatcher.housekeeping()

    path = f"/v1/deliveries/{delivery_id}/retry"
    foreign = await hub.client.post(path, params={"tenant": a.name}, headers=_auth(a.admin))
    assert foreign.status_code == 404
    assert await _archived(sessionmaker, delivery_id)
    own = await hub.client.post(path, params={"tenant": b.name}, headers=_auth(b.admin))
    assert own.status_code == 202, own.text
    await receiver.wait_for("/b", 2)


async def test_a_definition_put_naming_two_tenants_is_refused(
    hub: Any, admin_key: str, receiver: Receiver
) -> None:
    name = unique("twice")
    path = f"/v1/admin/delivery-definitions/{name}"
    body = {"tenant": "t-one", "url": receiver.url("/x")}
    response = await hub.client.put(
        path, params={"tenant": "t-two"}, json=body, headers=_auth(admin_key)
    )
    assert response.status_code == 422 and "tenant" in response.json()["detail"]
    by_query = await hub.client.put(
        path, params={"tenant": "t-two"}, json={"url": body["url"]}, headers=_auth(admin_key)
    )
    assert by_query.status_code == 201 and by_query.json()["tenant"] == "t-two"


class NoKicks:
    def kick(self, expected: object) -> None:
        raise AssertionError("nothing to kick")


async def test_library_mode_enqueues_on_the_named_tenants_definition(
    sessionmaker: Maker,
) -> None:
    name, tenant = unique("library"), unique("tl")
    spec = webhook_spec("https://example.com/hook")
    async with sessionmaker.begin() as session:
        await DeliveryService(NoKicks(), TargetCheck(AddressGuard())).put_definition(
            session, tenant, name, spec, False, False
        )
    async with UnitOfWork(sessionmaker) as unit:
        with pytest.raises(InvalidInput):
            await enqueue(unit, name, {"n": 1})  # the default tenant has no such name
        delivery_id = await enqueue(unit, name, {"n": 1}, tenant=tenant)
    async with sessionmaker() as session:
        row = await session.get(Delivery, delivery_id)
        assert row is not None and row.tenant == tenant


def _schema_drift(connection: Connection) -> tuple[list[Any], list[str]]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    diffs = compare_metadata(context, Base.metadata)
    drift = [d for d in diffs if any(table in repr(d) for table in DELIVERY_TABLES)]
    key = inspect(connection).get_pk_constraint("delivery_definitions")["constrained_columns"]
    return drift, list(key)


async def test_the_migrated_delivery_tables_match_the_models(sessionmaker: Maker) -> None:
    async with sessionmaker() as session:
        connection = await session.connection()
        drift, key = await connection.run_sync(_schema_drift)
    assert drift == []
    assert key == ["tenant", "name"]
    columns = [c.name for c in DeliveryDefinition.__table__.primary_key.columns]
    assert columns == key
    for table in DELIVERY_TABLES:
        assert not Base.metadata.tables[table].c.tenant.nullable
