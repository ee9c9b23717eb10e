"""BOLA matrix: two users x every /v1/me route that takes an id x own/foreign/missing id.

A foreign id answers exactly like a missing one (404, or nothing updated), and leaves
the owner's copy untouched. The same user id in another tenant is another user.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from ulid import ULID

from support.sse import EventReader
from support.tls import TEST_TLS
from support.webpush import Browser

Route = Callable[[httpx.AsyncClient, dict[str, str], str], Awaitable[httpx.Response]]


async def _get(client: httpx.AsyncClient, auth: dict[str, str], nid: str) -> httpx.Response:
    return await client.get(f"/v1/me/notifications/{nid}", headers=auth)


async def _patch(client: httpx.AsyncClient, auth: dict[str, str], nid: str) -> httpx.Response:
    body = {"read": True, "seen": True}
    return await client.patch(f"/v1/me/notifications/{nid}", json=body, headers=auth)


async def _delete(client: httpx.AsyncClient, auth: dict[str, str], nid: str) -> httpx.Response:
    return await client.delete(f"/v1/me/notifications/{nid}", headers=auth)


async def _bulk_read(client: httpx.AsyncClient, auth: dict[str, str], nid: str) -> httpx.Response:
    body = {"ids": [nid], "read": True, "seen": True}
    return await client.post("/v1/me/notifications/bulk", json=body, headers=auth)


async def _bulk_delete(client: httpx.AsyncClient, auth: dict[str, str], nid: str) -> httpx.Response:
    body = {"ids": [nid], "delete": True}
    return await client.post("/v1/me/notifications/bulk", json=body, headers=auth)


@dataclass(frozen=True)
class Expect:
    own: int
    elsewhere: int  # foreign and missing alike
    updated: bool = False  # the answer is {"updated": N}: 1 for own, 0 otherwise


ROUTES: dict[str, tuple[Route, Expect]] = {
    "GET /v1/me/notifications/{id}": (_get, Expect(200, 404)),
    "PATCH /v1/me/notifications/{id}": (_patch, Expect(200, 404)),
    "DELETE /v1/me/notifications/{id}": (_delete, Expect(204, 404)),
    "POST /v1/me/notifications/bulk read": (_bulk_read, Expect(200, 200, updated=True)),
    "POST /v1/me/notifications/bulk delete": (_bulk_delete, Expect(200, 200, updated=True)),
}


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _publish(hub: Any, key: str, user: str, tenant: str = "default") -> str:
    body = {"tenant": tenant, "recipients": {"users": [user]}, "title": f"for {user}"}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _untouched(hub: Any, auth: dict[str, str], nid: str) -> None:
    response = await hub.client.get(f"/v1/me/notifications/{nid}", headers=auth)
    assert response.status_code == 200, "the owner's copy is gone"
    item = response.json()
    assert (item["status"], item["seen"], item["read_at"]) == ("unread", False, None)


@pytest.mark.parametrize("kind", ["own", "foreign", "missing"])
@pytest.mark.parametrize("actor", [0, 1])
@pytest.mark.parametrize("route", list(ROUTES))
async def test_bola_matrix(
    hub: Any, admin_key: str, make_token: Any, route: str, actor: int, kind: str
) -> None:
    users = [f"bola-a-{secrets.token_hex(3)}", f"bola-b-{secrets.token_hex(3)}"]
    auths = [_auth(make_token(u)) for u in users]
    ids = [await _publish(hub, admin_key, u) for u in users]
    me, other = actor, 1 - actor
    target = {"own": ids[me], "foreign": ids[other], "missing": str(ULID())}[kind]
    call, expect = ROUTES[route]

    response = await call(hub.client, auths[me], target)

    status = expect.own if kind == "own" else expect.elsewhere
    assert response.status_code == status, response.text
    if response.status_code == 404:
        # Indistinguishable from an id nobody has: same status, same words.
        unknown = str(ULID())
        baseline = await call(hub.client, auths[me], unknown)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.text.replace(target, "?") == baseline.text.replace(unknown, "?")
    if expect.updated:
        assert response.json() == {"updated": 1 if kind == "own" else 0}
    await _untouched(hub, auths[other], ids[other])


async def test_bola_foreign_subscription_cannot_be_cancelled(
    hub: Any, admin_key: str, make_token: Any
) -> None:
    admin = _auth(admin_key)
    rule = f"bola_rule_{secrets.token_hex(3)}"
    spec = {"target_type": "doc", "recipients": [{"relationship": "author", "title": "hi"}]}
    assert (await hub.client.put(f"/v1/admin/rules/{rule}", json=spec, headers=admin)).is_success
    target = {"type": "doc", "id": "d-1"}
    relation = {"user": "bola-owner", "relationship": "author", "target": target}
    assert (await hub.client.post("/v1/relationships", json=relation, headers=admin)).is_success
    owner, intruder = _auth(make_token("bola-owner")), _auth(make_token("bola-intruder"))

    cancel = {"rule": rule, "target": target}
    refused = await hub.client.request(
        "DELETE", "/v1/me/subscriptions", json=cancel, headers=intruder
    )
    assert refused.status_code == 404

    listed = (await hub.client.get("/v1/me/subscriptions", headers=owner)).json()
    assert [s["rule"] for s in listed["subscriptions"]] == [rule]
    assert (await hub.client.get("/v1/me/subscriptions", headers=intruder)).json() == {
        "subscriptions": [],
        "next_cursor": None,
    }


async def test_same_user_id_in_another_tenant_sees_nothing(
    hub: Any, admin_key: str, make_token: Any
) -> None:
    user = f"bola-t-{secrets.token_hex(3)}"
    nid = await _publish(hub, admin_key, user)
    home, away = _auth(make_token(user)), _auth(make_token(user, tenant="acme"))

    page = (await hub.client.get("/v1/me/notifications", headers=away)).json()
    assert page["items"] == [] and page["unread"] == 0
    counts = (await hub.client.get("/v1/me/notifications/counts", headers=away)).json()
    assert counts == {"unread": 0, "unseen": 0, "total": 0, "views": {}}
    for call, _ in ROUTES.values():
        response = await call(hub.client, away, nid)
        assert response.status_code in (200, 404)
        if response.status_code == 200:
            assert response.json() == {"updated": 0}
    read_all = await hub.client.post("/v1/me/notifications/read-all", json={}, headers=away)
    assert read_all.json() == {"updated": 0}
    await _untouched(hub, home, nid)

    prefs = {"categories": {"restock": {"inbox": False, "push": False}}}
    assert (await hub.client.put("/v1/me/preferences", json=prefs, headers=away)).is_success
    assert (await hub.client.get("/v1/me/preferences", headers=home)).json() == {
        "categories": {},
        "locale": None,
    }

    url = f"{hub.base_url}/v1/me/stream"
    async with (
        httpx.AsyncClient(timeout=10, verify=TEST_TLS) as client,
        client.stream("GET", url, headers=away) as stream,
    ):
        first = await EventReader(stream).next()
        assert first.event == "counts" and first.data["total"] == 0


@pytest.mark.parametrize("kind", ["own", "foreign", "foreign-tenant", "missing"])
async def test_bola_push_subscription_removal(hub: Any, make_token: Any, kind: str) -> None:
    """`DELETE /v1/me/push-subscriptions/{id}`: another user's id (in the tenant or in
    another) answers exactly like an id nobody has, and leaves it in place."""
    users = [f"bola-p-{secrets.token_hex(3)}", f"bola-q-{secrets.token_hex(3)}"]
    owner = {"own": users[0], "foreign": users[1], "foreign-tenant": users[0]}.get(kind)
    tenant = "acme" if kind == "foreign-tenant" else "default"
    me = _auth(make_token(users[0]))
    sid = str(ULID())
    if owner is not None:
        body = Browser().subscription(f"https://push.example.test/{secrets.token_hex(4)}")
        holder = _auth(make_token(owner, tenant=tenant))
        added = await hub.client.post("/v1/me/push-subscriptions", json=body, headers=holder)
        sid = added.json()["id"]

    response = await hub.client.delete(f"/v1/me/push-subscriptions/{sid}", headers=me)

    if kind == "own":
        assert response.status_code == 204
        return
    unknown = str(ULID())
    baseline = await hub.client.delete(f"/v1/me/push-subscriptions/{unknown}", headers=me)
    assert response.status_code == baseline.status_code == 404
    assert response.text.replace(sid, "?") == baseline.text.replace(unknown, "?")
    if owner is not None:
        listed = await hub.client.get("/v1/me/push-subscriptions", headers=holder)
        assert [s["id"] for s in listed.json()["subscriptions"]] == [sid]
