"""The tenant isolation table of SECURITY.md, walked with keys and users of two tenants.

Every operation in the OpenAPI schema has a row there, and a probe here. A probe sets
up an object in tenant B, attacks it with tenant A's credentials (naming B, or naming
B's object from A), asserts the refusal and that B's object is unchanged, then does
the same call with B's credentials to prove the attack was aimed at something real.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from notifyhub.db.repositories import push_subscriptions
from notifyhub.settings import Settings
from support.deliveries import reaching_localhost
from support.receiver import Receiver
from support.sse import EventReader
from support.tls import TEST_TLS
from support.webpush import Browser

SECURITY = Path(__file__).resolve().parents[2] / "SECURITY.md"
ROW = re.compile(r"^\| `(?P<op>[A-Z]+ /[^`]*)` \| (?P<who>[^|]+) \|")

Headers = dict[str, str]


def table_rows() -> list[str]:
    """The operations named in SECURITY.md's "Tenant isolation" section, in order."""
    section = SECURITY.read_text().split("## Tenant isolation", 1)[1].split("\n## ", 1)[0]
    return [m["op"] for line in section.splitlines() if (m := ROW.match(line))]


@dataclass
class Tenants:
    """Tenants `a` (the attacker) and `b` (the victim), each with bound keys and a user."""

    hub: Any
    a: str
    b: str
    keys: dict[tuple[str, str], Headers]
    receiver_url: str
    user: str = "u"

    @property
    def client(self) -> httpx.AsyncClient:
        return self.hub.client  # type: ignore[no-any-return]

    def key(self, tenant: str, scope: str) -> Headers:
        return self.keys[(tenant, scope)]

    def me(self, tenant: str) -> Headers:
        return _auth(self.hub.tokens.mint_user_token(self.user, tenant))


def _auth(secret: str) -> Headers:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return reaching_localhost(settings)


@pytest.fixture
async def tenants(
    hub: Any, receiver: Receiver, create_key: Callable[..., Awaitable[str]]
) -> Tenants:
    suffix = secrets.token_hex(3)
    a, b = f"ta-{suffix}", f"tb-{suffix}"
    keys = {
        (tenant, scope): _auth(await create_key(f"iso-{scope}", scope, tenant))
        for tenant in (a, b)
        for scope in ("publish", "consume", "admin")
    }
    return Tenants(hub, a, b, keys, receiver.url())


def _ok(response: httpx.Response, *codes: int) -> httpx.Response:
    assert response.status_code in (codes or (200, 201, 202, 204)), response.text
    return response


def _refused(response: httpx.Response, *codes: int) -> None:
    """An attack's answer: the expected refusal as problem+json, with no victim data."""
    assert response.status_code in codes, response.text
    assert response.headers["content-type"] == "application/problem+json"


# --- notifications -------------------------------------------------------------------------


async def _publish(t: Tenants, tenant: str, **extra: Any) -> str:
    body = {"tenant": tenant, "recipients": {"users": [t.user]}, "title": "secret-of-" + tenant}
    body.update(extra)
    response = await t.client.post("/v1/notifications", json=body, headers=t.key(tenant, "publish"))
    return str(_ok(response, 202).json()["id"])


async def _item(t: Tenants, tenant: str, nid: str) -> dict[str, Any]:
    response = await t.client.get(f"/v1/me/notifications/{nid}", headers=t.me(tenant))
    return dict(_ok(response, 200).json())


async def _total(t: Tenants, tenant: str) -> int:
    response = await t.client.get("/v1/me/notifications/counts", headers=t.me(tenant))
    return int(_ok(response, 200).json()["total"])


async def probe_publish(t: Tenants) -> None:
    body = {"tenant": t.b, "recipients": {"users": [t.user]}, "title": "forged"}
    _refused(
        await t.client.post("/v1/notifications", json=body, headers=t.key(t.a, "publish")), 403
    )
    assert await _total(t, t.b) == 0
    _ok(await t.client.put(f"/v1/admin/groups/g?tenant={t.b}", headers=t.key(t.b, "admin")))
    via_group = {"tenant": t.a, "recipients": {"groups": ["g"]}, "title": "to B's group"}
    answer = await t.client.post("/v1/notifications", json=via_group, headers=t.key(t.a, "publish"))
    _refused(answer, 422)  # B's group does not exist in A
    await _publish(t, t.b)
    assert await _total(t, t.b) == 1


async def probe_recall(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    attacker = t.key(t.a, "publish")
    _refused(await t.client.delete(f"/v1/notifications/{nid}?tenant={t.b}", headers=attacker), 403)
    _refused(await t.client.delete(f"/v1/notifications/{nid}?tenant={t.a}", headers=attacker), 404)
    assert (await _item(t, t.b, nid))["title"] == f"secret-of-{t.b}"
    owner = t.key(t.b, "publish")
    _ok(await t.client.delete(f"/v1/notifications/{nid}?tenant={t.b}", headers=owner), 204)
    assert await _total(t, t.b) == 0
    # a thread's latest activity: the same user name and thread key in both tenants
    mine = await _publish(t, t.a, thread_key="k")
    first = await _publish(t, t.b, thread_key="k")
    latest = await _publish(t, t.b, thread_key="k", title="latest-of-" + t.b)
    _refused(await t.client.delete(f"/v1/notifications/{latest}", headers=attacker), 403, 404)
    assert (await _item(t, t.b, first))["title"] == f"latest-of-{t.b}"
    _ok(await t.client.delete(f"/v1/notifications/{latest}?tenant={t.b}", headers=owner), 204)
    shown = await _item(t, t.b, first)
    assert (shown["title"], shown["thread"]["activity_count"]) == (f"secret-of-{t.b}", 1)
    assert (await _item(t, t.a, mine))["thread"]["activity_count"] == 1


# --- the inbox: the tenant is the token's; the same user id elsewhere is someone else -------


async def probe_list(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    page = _ok(await t.client.get("/v1/me/notifications", headers=t.me(t.a))).json()
    assert page["items"] == [] and page["unread"] == 0
    since = await t.client.get("/v1/me/notifications?since=0", headers=t.me(t.a))
    assert _ok(since).json()["items"] == []
    page = _ok(await t.client.get("/v1/me/notifications", headers=t.me(t.b))).json()
    assert [i["id"] for i in page["items"]] == [nid]


async def probe_counts(t: Tenants) -> None:
    await _publish(t, t.b)
    assert await _total(t, t.a) == 0
    assert await _total(t, t.b) == 1


async def probe_read_all(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    url = "/v1/me/notifications/read-all"
    assert _ok(await t.client.post(url, json={}, headers=t.me(t.a))).json() == {"updated": 0}
    assert (await _item(t, t.b, nid))["status"] == "unread"
    # a view of b's user is no view of a's (the same name, another tenant): refused
    mine = await t.client.put("/v1/me/views/mine", json={"filter": {}}, headers=t.me(t.b))
    assert mine.status_code == 201, mine.text
    refused = await t.client.post(url, json={"view": "mine"}, headers=t.me(t.a))
    assert refused.status_code == 422
    assert (await _item(t, t.b, nid))["status"] == "unread"
    assert _ok(await t.client.post(url, json={"view": "mine"}, headers=t.me(t.b))).json() == {
        "updated": 1
    }


async def probe_archive_all(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    url = "/v1/me/notifications/archive-all"
    assert _ok(await t.client.post(url, json={}, headers=t.me(t.a))).json() == {"updated": 0}
    assert (await _item(t, t.b, nid))["archived"] is False
    assert _ok(await t.client.post(url, json={}, headers=t.me(t.b))).json() == {"updated": 1}
    assert (await _item(t, t.b, nid))["archived"] is True


async def probe_bulk(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    url = "/v1/me/notifications/bulk"
    bodies = ({"ids": [nid], "read": True}, {"ids": [nid], "archived": True})
    for body in (*bodies, {"ids": [nid], "delete": True}):
        answer = await t.client.post(url, json=body, headers=t.me(t.a))
        assert _ok(answer).json() == {"updated": 0}
    assert (await _item(t, t.b, nid))["status"] == "unread"
    body = {"ids": [nid], "read": True}
    assert _ok(await t.client.post(url, json=body, headers=t.me(t.b))).json() == {"updated": 1}


async def probe_get(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    _refused(await t.client.get(f"/v1/me/notifications/{nid}", headers=t.me(t.a)), 404)
    assert (await _item(t, t.b, nid))["id"] == nid


async def probe_patch(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    url = f"/v1/me/notifications/{nid}"
    for body in ({"read": True}, {"archived": True}, {"pinned": True}):
        _refused(await t.client.patch(url, json=body, headers=t.me(t.a)), 404)
    item = await _item(t, t.b, nid)
    assert (item["status"], item["archived"], item["pinned"]) == ("unread", False, False)
    patched = _ok(await t.client.patch(url, json={"read": True}, headers=t.me(t.b))).json()
    assert patched["status"] == "read"


async def probe_action(t: Tenants) -> None:
    nid = await _publish(t, t.b, actions=[{"id": "ok", "label": "OK"}])
    url = f"/v1/me/notifications/{nid}/actions/ok"
    _refused(await t.client.post(url, headers=t.me(t.a)), 404)
    assert (await _item(t, t.b, nid))["completed"] is None
    assert _ok(await t.client.post(url, headers=t.me(t.b))).json()["completed"]["action"] == "ok"


async def probe_activities(t: Tenants) -> None:
    nid = await _publish(t, t.b, thread_key="post:1")
    url = f"/v1/me/notifications/{nid}/activities"
    _refused(await t.client.get(url, headers=t.me(t.a)), 404)
    assert [a["id"] for a in _ok(await t.client.get(url, headers=t.me(t.b))).json()["items"]] == [
        nid
    ]


async def probe_delete(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    url = f"/v1/me/notifications/{nid}"
    _refused(await t.client.delete(url, headers=t.me(t.a)), 404)
    assert (await _item(t, t.b, nid))["id"] == nid
    _ok(await t.client.delete(url, headers=t.me(t.b)), 204)


async def probe_preferences(t: Tenants) -> None:
    prefs = {
        "categories": {"restock": {"inbox": False, "push": False, "email": False}},
        "locale": "de",
    }
    _ok(await t.client.put("/v1/me/preferences", json=prefs, headers=t.me(t.a)))
    assert _ok(await t.client.get("/v1/me/preferences", headers=t.me(t.b))).json() == {
        "categories": {},
        "locale": None,  # A's locale is A's alone
    }
    await _publish(t, t.b, category="restock")
    assert await _total(t, t.b) == 1  # A's preference does not drop B's copy
    assert _ok(await t.client.get("/v1/me/preferences", headers=t.me(t.a))).json() == prefs


async def _subscribe(t: Tenants, tenant: str) -> dict[str, Any]:
    rule = {"target_type": "doc", "recipients": [{"relationship": "author", "title": "hi"}]}
    admin = t.key(tenant, "admin")
    _ok(await t.client.put(f"/v1/admin/rules/r1?tenant={tenant}", json=rule, headers=admin))
    target = {"type": "doc", "id": "d1"}
    link = {"tenant": tenant, "user": t.user, "relationship": "author", "target": target}
    _ok(await t.client.post("/v1/relationships", json=link, headers=t.key(tenant, "publish")))
    return {"rule": "r1", "target": target}


async def _subscriptions(t: Tenants, tenant: str) -> list[Any]:
    response = await t.client.get("/v1/me/subscriptions", headers=t.me(tenant))
    return list(_ok(response).json()["subscriptions"])


async def probe_subscriptions(t: Tenants) -> None:
    await _subscribe(t, t.b)
    assert await _subscriptions(t, t.a) == []
    assert [s["rule"] for s in await _subscriptions(t, t.b)] == ["r1"]


async def probe_cancel_subscription(t: Tenants) -> None:
    cancel = await _subscribe(t, t.b)
    answer = await t.client.request(
        "DELETE", "/v1/me/subscriptions", json=cancel, headers=t.me(t.a)
    )
    _refused(answer, 404)
    assert len(await _subscriptions(t, t.b)) == 1
    answer = await t.client.request(
        "DELETE", "/v1/me/subscriptions", json=cancel, headers=t.me(t.b)
    )
    _ok(answer, 204)
    assert await _subscriptions(t, t.b) == []


async def _first_counts(t: Tenants, url: str, headers: Headers) -> dict[str, Any]:
    async with (
        httpx.AsyncClient(timeout=10, verify=TEST_TLS) as client,
        client.stream("GET", f"{t.hub.base_url}{url}", headers=headers) as stream,
    ):
        first = await EventReader(stream).next()
        assert first.event == "counts", first
        return dict(first.data)


async def probe_stream(t: Tenants) -> None:
    await _publish(t, t.b)
    assert (await _first_counts(t, "/v1/me/stream", t.me(t.a)))["total"] == 0
    assert (await _first_counts(t, "/v1/me/stream", t.me(t.b)))["total"] == 1


async def probe_stream_token(t: Tenants) -> None:
    await _publish(t, t.b)
    response = await t.client.post("/v1/me/stream-tokens", headers=t.me(t.a))
    token = _ok(response).json()["token"]
    counts = await _first_counts(t, f"/v1/me/stream?access_token={token}", {})
    assert counts["total"] == 0  # A's stream token opens A's inbox, never B's


# --- admin: groups, topics, rules, keys ----------------------------------------------------


async def _members(t: Tenants, tenant: str) -> list[str]:
    url = f"/v1/admin/groups/g/members?tenant={tenant}"
    return list(_ok(await t.client.get(url, headers=t.key(tenant, "admin"))).json()["members"])


async def _group_of_b(t: Tenants) -> None:
    admin = t.key(t.b, "admin")
    _ok(await t.client.put(f"/v1/admin/groups/g?tenant={t.b}", headers=admin))
    url = f"/v1/admin/groups/g/members?tenant={t.b}"
    _ok(await t.client.post(url, json={"add": ["m1"]}, headers=admin))


async def probe_group_put(t: Tenants) -> None:
    attacker = t.key(t.a, "admin")
    _refused(await t.client.put(f"/v1/admin/groups/g?tenant={t.b}", headers=attacker), 403)
    listed = await t.client.get(f"/v1/admin/groups?tenant={t.b}", headers=t.key(t.b, "admin"))
    assert _ok(listed).json()["groups"] == []
    await _group_of_b(t)
    _ok(await t.client.put(f"/v1/admin/groups/g?tenant={t.a}", headers=attacker), 201)
    assert await _members(t, t.a) == []  # same name, another group


async def probe_group_delete(t: Tenants) -> None:
    await _group_of_b(t)
    url = f"/v1/admin/groups/g?tenant={t.b}"
    _refused(await t.client.delete(url, headers=t.key(t.a, "admin")), 403)
    assert await _members(t, t.b) == ["m1"]
    _ok(await t.client.delete(url, headers=t.key(t.b, "admin")), 204)


async def probe_group_list(t: Tenants) -> None:
    await _group_of_b(t)
    url = f"/v1/admin/groups?tenant={t.b}"
    _refused(await t.client.get(url, headers=t.key(t.a, "admin")), 403)
    own = await t.client.get(f"/v1/admin/groups?tenant={t.a}", headers=t.key(t.a, "admin"))
    assert _ok(own).json()["groups"] == []
    assert [
        g["name"]
        for g in _ok(await t.client.get(url, headers=t.key(t.b, "admin"))).json()["groups"]
    ] == ["g"]


async def probe_group_get(t: Tenants) -> None:
    await _group_of_b(t)
    attacker = t.key(t.a, "admin")
    _refused(await t.client.get(f"/v1/admin/groups/g?tenant={t.b}", headers=attacker), 403)
    _refused(await t.client.get(f"/v1/admin/groups/g?tenant={t.a}", headers=attacker), 404)
    owner = await t.client.get(f"/v1/admin/groups/g?tenant={t.b}", headers=t.key(t.b, "admin"))
    assert _ok(owner).json()["members"] == 1


async def probe_group_members_change(t: Tenants) -> None:
    await _group_of_b(t)
    url = f"/v1/admin/groups/g/members?tenant={t.b}"
    change = {"add": ["intruder"], "remove": ["m1"]}
    _refused(await t.client.post(url, json=change, headers=t.key(t.a, "admin")), 403)
    assert await _members(t, t.b) == ["m1"]


async def probe_group_members_list(t: Tenants) -> None:
    await _group_of_b(t)
    url = f"/v1/admin/groups/g/members?tenant={t.b}"
    _refused(await t.client.get(url, headers=t.key(t.a, "admin")), 403)
    assert await _members(t, t.b) == ["m1"]


async def probe_api_keys(t: Tenants) -> None:
    def tenants_in(response: httpx.Response) -> set[str | None]:
        return {k["tenant"] for k in _ok(response).json()["keys"]}

    assert tenants_in(await t.client.get("/v1/admin/api-keys", headers=t.key(t.a, "admin"))) == {
        t.a
    }
    assert tenants_in(await t.client.get("/v1/admin/api-keys", headers=t.key(t.b, "admin"))) == {
        t.b
    }
    own = await t.client.get(f"/v1/admin/api-keys?tenant={t.a}", headers=t.key(t.a, "admin"))
    assert tenants_in(own) == {t.a}
    url = f"/v1/admin/api-keys?tenant={t.b}"
    _refused(await t.client.get(url, headers=t.key(t.a, "admin")), 403)


async def probe_api_key_create(t: Tenants) -> None:
    url = "/v1/admin/api-keys"
    name = f"iso-new-{secrets.token_hex(4)}"
    for tenant in (t.b, None):
        body = {"name": name, "scope": "publish", "tenant": tenant}
        _refused(await t.client.post(url, json=body, headers=t.key(t.a, "admin")), 403)
    listed = _ok(await t.client.get(url, headers=t.key(t.b, "admin"))).json()["keys"]
    assert name not in [k["name"] for k in listed]
    body = {"name": name, "scope": "publish", "tenant": t.b}
    made = _ok(await t.client.post(url, json=body, headers=t.key(t.b, "admin")), 201).json()
    assert made["tenant"] == t.b
    # B has the name now; A making a key of that name learns nothing of it (no 409)
    own = {**body, "tenant": t.a}
    assert _ok(await t.client.post(url, json=own, headers=t.key(t.a, "admin")), 201)


async def probe_api_key_revoke(t: Tenants) -> None:
    name = f"iso-victim-{secrets.token_hex(4)}"
    body = {"name": name, "scope": "publish", "tenant": t.b}
    url = "/v1/admin/api-keys"
    secret = _ok(await t.client.post(url, json=body, headers=t.key(t.b, "admin"))).json()["key"]
    _refused(await t.client.delete(f"{url}/{name}", headers=t.key(t.a, "admin")), 404)
    named = await t.client.delete(f"{url}/{name}?tenant={t.b}", headers=t.key(t.a, "admin"))
    _refused(named, 403)
    await _publish(t, t.b)  # B's own key still works, and so does the victim:
    note = {"tenant": t.b, "recipients": {"users": [t.user]}, "title": "still valid"}
    _ok(await t.client.post("/v1/notifications", json=note, headers=_auth(secret)), 202)
    # A's key of the same name is another key: A revokes its own, B's still works
    own = {**body, "tenant": t.a}
    _ok(await t.client.post(url, json=own, headers=t.key(t.a, "admin")), 201)
    _ok(await t.client.delete(f"{url}/{name}", headers=t.key(t.a, "admin")), 204)
    _ok(await t.client.post("/v1/notifications", json=note, headers=_auth(secret)), 202)
    _ok(await t.client.delete(f"{url}/{name}", headers=t.key(t.b, "admin")), 204)
    refused = await t.client.post("/v1/notifications", json=note, headers=_auth(secret))
    _refused(refused, 401)


async def probe_audit(t: Tenants) -> None:
    await _group_of_b(t)
    url = "/v1/admin/audit"
    _refused(await t.client.get(f"{url}?tenant={t.b}", headers=t.key(t.a, "admin")), 403)
    assert _ok(await t.client.get(url, headers=t.key(t.a, "admin"))).json()["entries"] == []
    entries = _ok(await t.client.get(url, headers=t.key(t.b, "admin"))).json()["entries"]
    assert entries and {e["tenant"] for e in entries} == {t.b}


async def _topic_users(t: Tenants, tenant: str) -> list[str]:
    url = f"/v1/admin/topics/tp?tenant={tenant}"
    return list(_ok(await t.client.get(url, headers=t.key(tenant, "admin"))).json()["users"])


async def _topic_of_b(t: Tenants) -> str:
    url = f"/v1/admin/topics/tp?tenant={t.b}"
    _ok(await t.client.put(url, json={"users": ["m1"]}, headers=t.key(t.b, "admin")), 201)
    return url


async def probe_topic_put(t: Tenants) -> None:
    url = await _topic_of_b(t)
    answer = await t.client.put(url, json={"users": ["intruder"]}, headers=t.key(t.a, "admin"))
    _refused(answer, 403)
    assert await _topic_users(t, t.b) == ["m1"]


async def probe_topic_patch(t: Tenants) -> None:
    url = await _topic_of_b(t)
    change = {"add": {"users": ["intruder"]}, "remove": {"users": ["m1"]}}
    _refused(await t.client.patch(url, json=change, headers=t.key(t.a, "admin")), 403)
    assert await _topic_users(t, t.b) == ["m1"]


async def probe_topic_get(t: Tenants) -> None:
    url = await _topic_of_b(t)
    _refused(await t.client.get(url, headers=t.key(t.a, "admin")), 403)
    own = await t.client.get(f"/v1/admin/topics/tp?tenant={t.a}", headers=t.key(t.a, "admin"))
    _refused(own, 404)
    assert await _topic_users(t, t.b) == ["m1"]


async def probe_topic_delete(t: Tenants) -> None:
    url = await _topic_of_b(t)
    _refused(await t.client.delete(url, headers=t.key(t.a, "admin")), 403)
    assert await _topic_users(t, t.b) == ["m1"]
    _ok(await t.client.delete(url, headers=t.key(t.b, "admin")), 204)


RULE = {"target_type": "doc", "recipients": [{"relationship": "author", "title": "hi"}]}


async def _rule_title(t: Tenants, tenant: str) -> str:
    url = f"/v1/admin/rules/r1?tenant={tenant}"
    rule = _ok(await t.client.get(url, headers=t.key(tenant, "admin"))).json()
    return str(rule["recipients"][0]["title"])


async def _rule_of_b(t: Tenants) -> str:
    url = f"/v1/admin/rules/r1?tenant={t.b}"
    _ok(await t.client.put(url, json=RULE, headers=t.key(t.b, "admin")))
    return url


async def probe_rule_put(t: Tenants) -> None:
    url = await _rule_of_b(t)
    forged = {**RULE, "recipients": [{"relationship": "author", "title": "forged"}]}
    _refused(await t.client.put(url, json=forged, headers=t.key(t.a, "admin")), 403)
    assert await _rule_title(t, t.b) == "hi"


async def probe_rule_get(t: Tenants) -> None:
    url = await _rule_of_b(t)
    _refused(await t.client.get(url, headers=t.key(t.a, "admin")), 403)
    own = await t.client.get(f"/v1/admin/rules/r1?tenant={t.a}", headers=t.key(t.a, "admin"))
    _refused(own, 404)
    assert await _rule_title(t, t.b) == "hi"


async def probe_rule_delete(t: Tenants) -> None:
    url = await _rule_of_b(t)
    _refused(await t.client.delete(url, headers=t.key(t.a, "admin")), 403)
    assert await _rule_title(t, t.b) == "hi"
    _ok(await t.client.delete(url, headers=t.key(t.b, "admin")), 204)


# --- events and relationships --------------------------------------------------------------


def _event(tenant: str) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "rule": "r1",
        "actor": {"type": "user", "id": "x"},
        "target": {"type": "doc", "id": "d1"},
    }


async def probe_event(t: Tenants) -> None:
    await _subscribe(t, t.b)
    answer = await t.client.post("/v1/events", json=_event(t.b), headers=t.key(t.a, "publish"))
    _refused(answer, 403)
    answer = await t.client.post("/v1/events", json=_event(t.a), headers=t.key(t.a, "publish"))
    _refused(answer, 422)  # B's rule is unknown in A
    assert await _total(t, t.b) == 0
    fired = await t.client.post("/v1/events", json=_event(t.b), headers=t.key(t.b, "publish"))
    assert _ok(fired, 202).json()["notifications"] == 1


def _link(tenant: str, user: str) -> dict[str, Any]:
    target = {"type": "doc", "id": "d1"}
    return {"tenant": tenant, "user": user, "relationship": "author", "target": target}


async def probe_relationship_add(t: Tenants) -> None:
    await _subscribe(t, t.b)
    forged = _link(t.b, "intruder")
    answer = await t.client.post("/v1/relationships", json=forged, headers=t.key(t.a, "publish"))
    _refused(answer, 403)
    fired = await t.client.post("/v1/events", json=_event(t.b), headers=t.key(t.b, "publish"))
    assert _ok(fired, 202).json()["notifications"] == 1  # the intruder was not subscribed


async def probe_relationship_remove(t: Tenants) -> None:
    await _subscribe(t, t.b)
    link = _link(t.b, t.user)
    answer = await t.client.request(
        "DELETE", "/v1/relationships", json=link, headers=t.key(t.a, "publish")
    )
    _refused(answer, 403)
    assert len(await _subscriptions(t, t.b)) == 1
    answer = await t.client.request(
        "DELETE", "/v1/relationships", json=link, headers=t.key(t.b, "publish")
    )
    _ok(answer)
    assert await _subscriptions(t, t.b) == []


# --- deliveries ------------------------------------------------------------------------------


async def _define(t: Tenants, tenant: str, url: str, auth: Headers | None = None) -> httpx.Response:
    body = {"tenant": tenant, "url": url, "retry_intervals": "1h", "need_confirm": True}
    path = "/v1/admin/delivery-definitions/hook"
    return await t.client.put(path, json=body, headers=auth or t.key(tenant, "admin"))


async def _definition_url(t: Tenants, tenant: str) -> str:
    path = f"/v1/admin/delivery-definitions/hook?tenant={tenant}"
    return str(_ok(await t.client.get(path, headers=t.key(tenant, "admin"))).json()["url"])


async def _delivery_of_b(t: Tenants) -> str:
    _ok(await _define(t, t.b, t.receiver_url))
    body = {"tenant": t.b, "definition": "hook", "payload": {"secret": "of-b"}}
    answer = await t.client.post("/v1/deliveries", json=body, headers=t.key(t.b, "publish"))
    return str(_ok(answer, 202).json()["id"])


async def probe_definition_put(t: Tenants) -> None:
    _ok(await _define(t, t.b, t.receiver_url), 201)
    _refused(await _define(t, t.b, "https://attacker.example/", t.key(t.a, "admin")), 403)
    assert await _definition_url(t, t.b) == t.receiver_url
    _ok(await _define(t, t.a, "https://a.example/hook"), 201)  # the name in A is A's own
    assert await _definition_url(t, t.b) == t.receiver_url
    targets = (  # nor turned into an e-mail or a publish that reaches A
        {"kind": "email", "email": {"to": ["a@a.example"], "subject": "s", "text": "t"}},
        {"kind": "rabbitmq", "rabbitmq": {"exchange": "amq.topic", "routing_key": "a"}},
    )
    path = f"/v1/admin/delivery-definitions/hook?tenant={t.b}"
    for target in targets:
        response = await t.client.put(path, json=target, headers=t.key(t.a, "admin"))
        _refused(response, 403)
    shown = _ok(await t.client.get(path, headers=t.key(t.b, "admin"))).json()
    assert (shown["kind"], shown["email"], shown["rabbitmq"]) == ("webhook", None, None)


async def probe_definition_get(t: Tenants) -> None:
    _ok(await _define(t, t.b, t.receiver_url), 201)
    path = "/v1/admin/delivery-definitions/hook"
    attacker = t.key(t.a, "admin")
    _refused(await t.client.get(f"{path}?tenant={t.b}", headers=attacker), 403)
    _refused(await t.client.get(f"{path}?tenant={t.a}", headers=attacker), 404)
    assert await _definition_url(t, t.b) == t.receiver_url


async def probe_delivery_post(t: Tenants) -> None:
    _ok(await _define(t, t.b, t.receiver_url), 201)
    attacker = t.key(t.a, "publish")
    for tenant, refusal in ((t.b, 403), (t.a, 422)):
        body = {"tenant": tenant, "definition": "hook", "payload": {"forged": True}}
        _refused(await t.client.post("/v1/deliveries", json=body, headers=attacker), refusal)
    await _delivery_of_b(t)


async def _delivery_by_id(t: Tenants, method: str, suffix: str, scope: str) -> None:
    did = await _delivery_of_b(t)
    path = f"/v1/deliveries/{did}{suffix}"
    attacker = t.key(t.a, scope)
    _refused(await t.client.request(method, f"{path}?tenant={t.b}", headers=attacker), 403)
    answer = await t.client.request(method, f"{path}?tenant={t.a}", headers=attacker)
    _refused(answer, 404)
    assert "of-b" not in answer.text
    owner = await t.client.get(f"/v1/deliveries/{did}?tenant={t.b}", headers=t.key(t.b, "publish"))
    assert _ok(owner).json()["payload"] == {"secret": "of-b"}
    mine = await t.client.request(method, f"{path}?tenant={t.b}", headers=t.key(t.b, scope))
    assert mine.status_code != 404, mine.text  # B's own call finds it


async def probe_delivery_get(t: Tenants) -> None:
    await _delivery_by_id(t, "GET", "", "publish")


async def probe_delivery_confirm(t: Tenants) -> None:
    await _delivery_by_id(t, "POST", "/confirm", "publish")


async def probe_delivery_retry(t: Tenants) -> None:
    await _delivery_by_id(t, "POST", "/retry", "admin")


async def _listed(t: Tenants, path: str, field: str, tenant: str) -> list[dict[str, Any]]:
    answer = await t.client.get(f"{path}?tenant={tenant}", headers=t.key(tenant, "admin"))
    return list(_ok(answer).json()[field])


async def _list_probe(t: Tenants, path: str, field: str) -> list[dict[str, Any]]:
    """B's list refused to A (403), A's own list empty; B's list, as B."""
    _refused(await t.client.get(f"{path}?tenant={t.b}", headers=t.key(t.a, "admin")), 403)
    assert await _listed(t, path, field, t.a) == []
    return await _listed(t, path, field, t.b)


async def probe_topic_list(t: Tenants) -> None:
    await _topic_of_b(t)
    assert [x["name"] for x in await _list_probe(t, "/v1/admin/topics", "topics")] == ["tp"]


async def probe_rule_list(t: Tenants) -> None:
    await _rule_of_b(t)
    assert [x["name"] for x in await _list_probe(t, "/v1/admin/rules", "rules")] == ["r1"]


async def probe_definition_list(t: Tenants) -> None:
    _ok(await _define(t, t.b, t.receiver_url), 201)
    found = await _list_probe(t, "/v1/admin/delivery-definitions", "definitions")
    assert [(x["name"], x["url"]) for x in found] == [("hook", t.receiver_url)]


async def probe_queue_list(t: Tenants) -> None:
    await _push(t, t.b)
    found = await _list_probe(t, "/v1/admin/queues", "queues")
    assert [(x["tenant"], x["name"], x["delayed"]) for x in found] == [(t.b, "q", 1)]


async def probe_delivery_list(t: Tenants) -> None:
    did = await _delivery_of_b(t)
    found = await _list_probe(t, "/v1/admin/deliveries", "deliveries")
    assert [x["id"] for x in found] == [did]


async def probe_user_lookup(t: Tenants) -> None:
    await _publish(t, t.b)
    _ok(await t.client.put(f"/v1/admin/groups/g?tenant={t.b}", headers=t.key(t.b, "admin")))
    change = {"add": [t.user]}
    url = f"/v1/admin/groups/g/members?tenant={t.b}"
    _ok(await t.client.post(url, json=change, headers=t.key(t.b, "admin")))
    attacker = t.key(t.a, "admin")
    answer = await t.client.get(f"/v1/admin/users/{t.b}/{t.user}", headers=attacker)
    _refused(answer, 403)
    assert "secret-of" not in answer.text
    own = _ok(await t.client.get(f"/v1/admin/users/{t.a}/{t.user}", headers=attacker)).json()
    assert own["counts"]["total"] == 0 and own["groups"] == [] and own["seq"] == 0
    owner = t.key(t.b, "admin")
    found = _ok(await t.client.get(f"/v1/admin/users/{t.b}/{t.user}", headers=owner)).json()
    assert found["counts"]["total"] == 1 and found["groups"] == ["g"]


async def probe_preference_defaults(t: Tenants) -> None:
    url = "/v1/admin/preference-defaults"
    theirs = {"categories": {"restock": {"inbox": True, "push": True, "email": True}}}
    _ok(await t.client.put(url, params={"tenant": t.b}, json=theirs, headers=t.key(t.b, "admin")))
    attacker = t.key(t.a, "admin")
    _refused(await t.client.get(url, params={"tenant": t.b}, headers=attacker), 403)
    mine = {"categories": {"restock": {"inbox": True, "push": False, "email": False}}}
    _refused(await t.client.put(url, params={"tenant": t.b}, json=mine, headers=attacker), 403)
    _ok(await t.client.put(url, params={"tenant": t.a}, json=mine, headers=attacker))
    found = await t.client.get(url, params={"tenant": t.b}, headers=t.key(t.b, "admin"))
    assert _ok(found).json() == {"tenant": t.b, **theirs}  # A's defaults are A's alone


async def probe_quiet_defaults(t: Tenants) -> None:
    url = "/v1/admin/quiet-defaults"
    theirs = {"schedule": {"mon-fri": ["22:00", "07:00"]}, "time_zone": "Europe/Berlin"}
    _ok(await t.client.put(url, params={"tenant": t.b}, json=theirs, headers=t.key(t.b, "admin")))
    attacker = t.key(t.a, "admin")
    _refused(await t.client.get(url, params={"tenant": t.b}, headers=attacker), 403)
    mine = {"schedule": {}, "time_zone": None}
    _refused(await t.client.put(url, params={"tenant": t.b}, json=mine, headers=attacker), 403)
    _ok(await t.client.put(url, params={"tenant": t.a}, json=mine, headers=attacker))
    found = await t.client.get(url, params={"tenant": t.b}, headers=t.key(t.b, "admin"))
    assert _ok(found).json() == {"tenant": t.b, **theirs}  # A's default is A's alone


async def probe_escalation_defaults(t: Tenants) -> None:
    url = "/v1/admin/escalation-defaults"
    step = {"after_s": 60, "unless": "read", "channel": "email"}
    theirs = {"categories": {"restock": [step]}}
    _ok(await t.client.put(url, params={"tenant": t.b}, json=theirs, headers=t.key(t.b, "admin")))
    attacker = t.key(t.a, "admin")
    _refused(await t.client.get(url, params={"tenant": t.b}, headers=attacker), 403)
    mine: dict[str, Any] = {"categories": {"restock": []}}
    _refused(await t.client.put(url, params={"tenant": t.b}, json=mine, headers=attacker), 403)
    _ok(await t.client.put(url, params={"tenant": t.a}, json=mine, headers=attacker))
    found = await t.client.get(url, params={"tenant": t.b}, headers=t.key(t.b, "admin"))
    assert _ok(found).json() == {"tenant": t.b, **theirs}  # A's defaults are A's alone


async def probe_escalations(t: Tenants) -> None:
    step = {"after_s": 3600, "unless": "read", "channel": "email"}
    await _publish(t, t.b, escalate=[step])
    owner, attacker = t.key(t.b, "admin"), t.key(t.a, "admin")
    url = f"/v1/admin/users/{t.b}/{t.user}/escalations"
    [pending] = _ok(await t.client.get(url, headers=owner)).json()["items"]
    _refused(await t.client.get(url, headers=attacker), 403)
    _refused(await t.client.delete(f"{url}/{pending['id']}", headers=attacker), 403)
    own = f"/v1/admin/users/{t.a}/{t.user}/escalations"
    assert _ok(await t.client.get(own, headers=attacker)).json() == {"items": []}
    _refused(await t.client.delete(f"{own}/{pending['id']}", headers=attacker), 404)
    assert _ok(await t.client.get(url, headers=owner)).json()["items"] == [pending]
    _ok(await t.client.delete(f"{url}/{pending['id']}", headers=owner), 204)


async def _profile(t: Tenants, tenant: str) -> dict[str, Any]:
    url = f"/v1/admin/users/{tenant}/{t.user}"
    return dict(_ok(await t.client.get(url, headers=t.key(tenant, "admin"))).json())


async def probe_user_profile_put(t: Tenants) -> None:
    owner, attacker = t.key(t.b, "admin"), t.key(t.a, "admin")
    mine = {"email": "b@example.com", "time_zone": "UTC", "quiet": {"sun": ["00:00", "24:00"]}}
    _ok(await t.client.put(f"/v1/admin/users/{t.b}/{t.user}", json=mine, headers=owner))
    forged = {"email": "attacker@example.com", "time_zone": "Europe/Lisbon", "quiet": {}}
    url = f"/v1/admin/users/{t.b}/{t.user}"
    _refused(await t.client.put(url, json=forged, headers=attacker), 403)
    _ok(await t.client.put(f"/v1/admin/users/{t.a}/{t.user}", json=forged, headers=attacker))
    found = await _profile(t, t.b)
    assert (found["email"], found["time_zone"]) == ("b@example.com", "UTC")
    assert found["quiet"]["schedule"] == {"sun": ["00:00", "24:00"]}
    assert (await _profile(t, t.a))["email"] == "attacker@example.com"


def _subscription(endpoint: str) -> dict[str, Any]:
    return Browser().subscription(endpoint)


async def _push_subscriptions(t: Tenants, tenant: str) -> list[str]:
    answer = await t.client.get("/v1/me/push-subscriptions", headers=t.me(tenant))
    return [s["endpoint"] for s in _ok(answer).json()["subscriptions"]]


async def _push_subscription_of_b(t: Tenants) -> tuple[str, str]:
    endpoint = f"https://push.example.test/b/{secrets.token_hex(4)}"
    url = "/v1/me/push-subscriptions"
    answer = await t.client.post(url, json=_subscription(endpoint), headers=t.me(t.b))
    return str(_ok(answer, 201).json()["id"]), endpoint


async def probe_push_key(t: Tenants) -> None:
    a = _ok(await t.client.get("/v1/me/push-key", headers=t.me(t.a))).json()
    b = _ok(await t.client.get("/v1/me/push-key", headers=t.me(t.b))).json()
    assert a == b and set(a) == {"public_key"}


async def probe_push_subscribe(t: Tenants) -> None:
    sid, endpoint = await _push_subscription_of_b(t)
    url = "/v1/me/push-subscriptions"
    answer = _ok(await t.client.post(url, json=_subscription(endpoint), headers=t.me(t.a)), 201)
    assert answer.json()["id"] != sid  # another subscription, in A
    assert await _push_subscriptions(t, t.b) == [endpoint]
    async with t.hub.app_state["sessionmaker"]() as session:
        stored = await push_subscriptions.get(session, t.b, sid)
    assert stored is not None and stored.user == t.user and stored.tenant == t.b


async def probe_push_subscriptions(t: Tenants) -> None:
    _, endpoint = await _push_subscription_of_b(t)
    assert await _push_subscriptions(t, t.a) == []
    assert await _push_subscriptions(t, t.b) == [endpoint]


async def probe_push_unsubscribe(t: Tenants) -> None:
    sid, endpoint = await _push_subscription_of_b(t)
    url = f"/v1/me/push-subscriptions/{sid}"
    _refused(await t.client.delete(url, headers=t.me(t.a)), 404)
    assert await _push_subscriptions(t, t.b) == [endpoint]
    _ok(await t.client.delete(url, headers=t.me(t.b)), 204)
    assert await _push_subscriptions(t, t.b) == []


async def probe_user_revoke_tokens(t: Tenants) -> None:
    counts = "/v1/me/notifications/counts"
    victim = t.me(t.b)
    attacker = t.key(t.a, "admin")
    answer = await t.client.post(f"/v1/admin/users/{t.b}/{t.user}/revoke-tokens", headers=attacker)
    _refused(answer, 403)
    _ok(await t.client.get(counts, headers=victim))
    # A revoking its own user of the same id leaves B's user alone
    _ok(await t.client.post(f"/v1/admin/users/{t.a}/{t.user}/revoke-tokens", headers=attacker))
    _ok(await t.client.get(counts, headers=victim))
    owner = t.key(t.b, "admin")
    _ok(await t.client.post(f"/v1/admin/users/{t.b}/{t.user}/revoke-tokens", headers=owner))
    _refused(await t.client.get(counts, headers=victim), 401)


async def probe_user_inbox(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    attacker = t.key(t.a, "admin")
    answer = await t.client.get(f"/v1/admin/inbox?tenant={t.b}&user={t.user}", headers=attacker)
    _refused(answer, 403)
    assert "secret-of" not in answer.text
    own = await t.client.get(f"/v1/admin/inbox?tenant={t.a}&user={t.user}", headers=attacker)
    assert _ok(own).json()["items"] == []
    owner = t.key(t.b, "admin")
    found = await t.client.get(f"/v1/admin/inbox?tenant={t.b}&user={t.user}", headers=owner)
    assert [i["id"] for i in _ok(found).json()["items"]] == [nid]


async def _tail(t: Tenants, tenant: str, headers: Headers) -> EventReader:
    url = f"/v1/admin/tail?tenant={tenant}&user={t.user}"
    request = t.client.build_request("GET", url, headers=headers)
    response = await t.client.send(request, stream=True)
    return EventReader(response)


async def probe_user_tail(t: Tenants) -> None:
    url = f"/v1/admin/tail?tenant={t.b}&user={t.user}"
    refused = await t.client.get(url, headers=t.key(t.a, "admin"))
    _refused(refused, 403)
    own = await _tail(t, t.a, t.key(t.a, "admin"))
    owner = await _tail(t, t.b, t.key(t.b, "admin"))
    try:
        assert own.response.status_code == owner.response.status_code == 200
        assert (await own.next()).event == (await owner.next()).event == "counts"
        nid = await _publish(t, t.b)
        event, _ = await owner.until("notification")
        assert event.data["id"] == nid
        mine = await _publish(t, t.a)  # A's tail sees A's user's next event, never B's
        event, seen = await own.until("notification")
        assert event.data["id"] == mine and all(e.data.get("id") != nid for e in seen)
    finally:
        await own.response.aclose()
        await owner.response.aclose()


async def probe_recipients_preview(t: Tenants) -> None:
    _ok(await t.client.put(f"/v1/admin/groups/g?tenant={t.b}", headers=t.key(t.b, "admin")))
    change = {"add": [t.user, "v2"]}
    url = f"/v1/admin/groups/g/members?tenant={t.b}"
    _ok(await t.client.post(url, json=change, headers=t.key(t.b, "admin")))
    body = {"tenant": t.b, "recipients": {"groups": ["g"]}}
    attacker = t.key(t.a, "admin")
    answer = await t.client.post("/v1/admin/recipients", json=body, headers=attacker)
    _refused(answer, 403)
    assert "v2" not in answer.text
    own = {"tenant": t.a, "recipients": {"groups": ["g"]}}
    unknown = await t.client.post("/v1/admin/recipients", json=own, headers=attacker)
    _refused(unknown, 422)
    assert "v2" not in unknown.text
    found = await t.client.post("/v1/admin/recipients", json=body, headers=t.key(t.b, "admin"))
    assert _ok(found).json() == {"tenant": t.b, "users": 2, "sample": [t.user, "v2"]}


async def probe_rule_preview(t: Tenants) -> None:
    await _rule_of_b(t)  # B's rule r1 exists; a preview by A renders A's body only
    body = {
        "rule": {"target_type": "post", "recipients": [{"relationship": "f", "title": "x"}]},
        "name": "r1",
        "actor": {"type": "user", "id": "a"},
        "target": {"type": "post", "id": "p"},
    }
    answer = await t.client.post("/v1/admin/rules/preview", json=body, headers=t.key(t.a, "admin"))
    assert _ok(answer).json()["recipients"][0]["title"] == "x"
    assert "secret-of" not in answer.text
    assert [x["name"] for x in await _listed(t, "/v1/admin/rules", "rules", t.a)] == []
    assert await _rule_title(t, t.b) == "hi"


# --- the delayed queue ---------------------------------------------------------------------


async def _push(t: Tenants, tenant: str, delay_ms: int = 3_600_000, **auth: Headers) -> str:
    body = {
        "tenant": tenant,
        "queue": "q",
        "body": {"secret": "of-" + tenant},
        "delay_ms": delay_ms,
    }
    key = auth.get("auth") or t.key(tenant, "publish")
    answer = await t.client.post("/v1/delayed", json=body, headers=key)
    return str(_ok(answer, 201).json()["id"]) if answer.status_code == 201 else ""


async def _status(t: Tenants, tenant: str, mid: str) -> str:
    path = f"/v1/delayed/{mid}?tenant={tenant}"
    return str(_ok(await t.client.get(path, headers=t.key(tenant, "publish"))).json()["status"])


async def _take(
    t: Tenants, tenant: str, wait_s: int, base: str = "/v1/queues"
) -> list[dict[str, Any]]:
    path = f"{base}/q/messages?tenant={tenant}&wait={wait_s}"
    answer = await t.client.get(path, headers=t.key(tenant, "consume"))
    return list(_ok(answer).json()["messages"])


async def probe_delayed_push(t: Tenants) -> None:
    body = {"tenant": t.b, "queue": "q", "body": "forged", "delay_ms": 0}
    answer = await t.client.post("/v1/delayed", json=body, headers=t.key(t.a, "publish"))
    _refused(answer, 403)
    mid = await _push(t, t.b, delay_ms=0)
    assert [m["id"] for m in await _take(t, t.b, wait_s=5)] == [mid]  # only B's own


async def _by_id(t: Tenants, method: str, path: str, scope: str) -> None:
    """A's key naming B is 403; B's id under A's own tenant is 404, with none of B's data."""
    attacker = t.key(t.a, scope)
    _refused(await t.client.request(method, f"{path}?tenant={t.b}", headers=attacker), 403)
    answer = await t.client.request(method, f"{path}?tenant={t.a}", headers=attacker)
    _refused(answer, 404)
    assert f"of-{t.b}" not in answer.text


async def probe_delayed_get(t: Tenants) -> None:
    mid = await _push(t, t.b)
    await _by_id(t, "GET", f"/v1/delayed/{mid}", "publish")
    assert await _status(t, t.b, mid) == "delayed"


async def probe_delayed_cancel(t: Tenants) -> None:
    mid = await _push(t, t.b)
    await _by_id(t, "DELETE", f"/v1/delayed/{mid}", "publish")
    assert await _status(t, t.b, mid) == "delayed"
    path = f"/v1/delayed/{mid}?tenant={t.b}"
    _ok(await t.client.delete(path, headers=t.key(t.b, "publish")), 204)
    assert await _status(t, t.b, mid) == "cancelled"


async def probe_consume(t: Tenants, base: str = "/v1/queues") -> None:
    """`base`: the queue routes, or their deprecated `/v1/topics` names (same rules)."""
    mid = await _push(t, t.b, delay_ms=0)
    path = f"{base}/q/messages?tenant={t.b}"
    _refused(await t.client.get(path, headers=t.key(t.a, "consume")), 403)
    assert await _take(t, t.a, wait_s=1, base=base) == []  # A's queue of the same name
    assert [m["id"] for m in await _take(t, t.b, wait_s=5, base=base)] == [mid]


async def probe_ack(t: Tenants, base: str = "/v1/queues") -> None:
    mid = await _push(t, t.b, delay_ms=0)
    (taken,) = await _take(t, t.b, wait_s=5, base=base)
    receipt = {"receipt": taken["receipt"]}
    path = f"{base}/q/messages/{mid}/ack"
    attacker = t.key(t.a, "consume")
    _refused(await t.client.post(f"{path}?tenant={t.b}", json=receipt, headers=attacker), 403)
    _refused(await t.client.post(f"{path}?tenant={t.a}", json=receipt, headers=attacker), 404)
    assert await _status(t, t.b, mid) == "reserved"
    owner = t.key(t.b, "consume")
    _ok(await t.client.post(f"{path}?tenant={t.b}", json=receipt, headers=owner), 204)
    assert await _status(t, t.b, mid) == "consumed"


async def probe_restore_all(t: Tenants) -> None:
    mid = await _push(t, t.b)
    path = f"/v1/delayed/restore?tenant={t.b}"
    _refused(await t.client.post(path, headers=t.key(t.a, "admin")), 403)
    answer = _ok(await t.client.post(path, headers=t.key(t.b, "admin"))).json()
    assert answer["restored"] == 0  # queued in Redis already: nothing to re-queue
    assert await _status(t, t.b, mid) == "delayed"


async def probe_restore_one(t: Tenants) -> None:
    mid = await _push(t, t.b)
    await _by_id(t, "POST", f"/v1/delayed/{mid}/restore", "admin")
    path = f"/v1/delayed/{mid}/restore?tenant={t.b}"
    assert _ok(await t.client.post(path, headers=t.key(t.b, "admin"))).json() == {"restored": 0}
    assert await _status(t, t.b, mid) == "delayed"


# --- operations: open to all, and never showing a tenant's data ----------------------------


async def _no_secrets(t: Tenants, path: str) -> None:
    await _publish(t, t.b)
    response = _ok(await t.client.get(path))
    assert f"secret-of-{t.b}" not in response.text and t.b not in response.text


async def probe_healthz(t: Tenants) -> None:
    await _no_secrets(t, "/healthz")


async def probe_readyz(t: Tenants) -> None:
    await _no_secrets(t, "/readyz")


async def probe_metrics(t: Tenants) -> None:
    await _no_secrets(t, "/metrics")


# --- views: a tenant's views reach its own users only; a user's own are theirs ------------

ALARMS = {"filter": {"severity_at_least": "error"}, "label": "Alarms"}


async def _tenant_views(t: Tenants, tenant: str) -> list[str]:
    url = f"/v1/admin/views?tenant={tenant}"
    listed = _ok(await t.client.get(url, headers=t.key(tenant, "admin"))).json()["views"]
    return [view["name"] for view in listed]


async def _user_views(t: Tenants, tenant: str) -> dict[str, Any]:
    answer = await t.client.get("/v1/me/notifications/counts", headers=t.me(tenant))
    return dict(_ok(answer).json()["views"])


async def probe_view_put(t: Tenants) -> None:
    url = f"/v1/admin/views/alarms?tenant={t.b}"
    _refused(await t.client.put(url, json=ALARMS, headers=t.key(t.a, "admin")), 403)
    assert await _tenant_views(t, t.b) == []
    _ok(await t.client.put(url, json=ALARMS, headers=t.key(t.b, "admin")), 201)
    await _publish(t, t.b, severity="critical")
    await _publish(t, t.a, severity="critical")
    assert (await _user_views(t, t.b))["alarms"]["total"] == 1
    assert await _user_views(t, t.a) == {}  # the same user id in A gets none of B's views
    url_a = f"/v1/admin/views/alarms?tenant={t.a}"
    _ok(await t.client.put(url_a, json=ALARMS, headers=t.key(t.a, "admin")), 201)
    assert (await _user_views(t, t.a))["alarms"]["total"] == 1  # A's own view, A's copies


async def probe_view_list(t: Tenants) -> None:
    _ok(
        await t.client.put(
            f"/v1/admin/views/alarms?tenant={t.b}", json=ALARMS, headers=t.key(t.b, "admin")
        )
    )
    url = f"/v1/admin/views?tenant={t.b}"
    _refused(await t.client.get(url, headers=t.key(t.a, "admin")), 403)
    assert await _tenant_views(t, t.a) == []
    assert await _tenant_views(t, t.b) == ["alarms"]


async def probe_view_get(t: Tenants) -> None:
    _ok(
        await t.client.put(
            f"/v1/admin/views/alarms?tenant={t.b}", json=ALARMS, headers=t.key(t.b, "admin")
        )
    )
    url = f"/v1/admin/views/alarms?tenant={t.b}"
    _refused(await t.client.get(url, headers=t.key(t.a, "admin")), 403)
    url_a = f"/v1/admin/views/alarms?tenant={t.a}"
    _refused(await t.client.get(url_a, headers=t.key(t.a, "admin")), 404)
    assert _ok(await t.client.get(url, headers=t.key(t.b, "admin"))).json()["name"] == "alarms"


async def probe_view_delete(t: Tenants) -> None:
    url = f"/v1/admin/views/alarms?tenant={t.b}"
    _ok(await t.client.put(url, json=ALARMS, headers=t.key(t.b, "admin")))
    _refused(await t.client.delete(url, headers=t.key(t.a, "admin")), 403)
    assert await _tenant_views(t, t.b) == ["alarms"]
    _ok(await t.client.delete(url, headers=t.key(t.b, "admin")), 204)
    assert await _tenant_views(t, t.b) == []


async def probe_my_views(t: Tenants) -> None:
    body = {"filter": {"tags_any": ["billing"]}}
    _ok(await t.client.put("/v1/me/views/money", json=body, headers=t.me(t.b)), 201)
    _ok(
        await t.client.put(
            f"/v1/admin/views/alarms?tenant={t.b}", json=ALARMS, headers=t.key(t.b, "admin")
        )
    )
    mine = _ok(await t.client.get("/v1/me/views", headers=t.me(t.a))).json()["views"]
    assert mine == []  # the same user id in A sees neither B's tenant views nor B's own
    theirs = _ok(await t.client.get("/v1/me/views", headers=t.me(t.b))).json()["views"]
    assert [(v["name"], v["scope"]) for v in theirs] == [
        ("alarms", "tenant"),
        ("money", "personal"),
    ]


async def probe_my_view_put(t: Tenants) -> None:
    body = {"filter": {"tags_any": ["billing"]}}
    _ok(await t.client.put("/v1/me/views/money", json=body, headers=t.me(t.b)), 201)
    other = {"filter": {"tags_any": ["other"]}}
    _ok(await t.client.put("/v1/me/views/money", json=other, headers=t.me(t.a)), 201)  # A's own
    theirs = _ok(await t.client.get("/v1/me/views", headers=t.me(t.b))).json()["views"]
    assert theirs[0]["filter"] == {"tags_any": ["billing"]}
    await _publish(t, t.b, tags=["billing"])
    assert (await _user_views(t, t.b))["money"]["total"] == 1
    assert (await _user_views(t, t.a))["money"]["total"] == 0


async def probe_my_view_delete(t: Tenants) -> None:
    body = {"filter": {"tags_any": ["billing"]}}
    _ok(await t.client.put("/v1/me/views/money", json=body, headers=t.me(t.b)), 201)
    _refused(await t.client.delete("/v1/me/views/money", headers=t.me(t.a)), 404)
    assert "money" in await _user_views(t, t.b)
    _ok(await t.client.delete("/v1/me/views/money", headers=t.me(t.b)), 204)
    assert await _user_views(t, t.b) == {}


async def probe_routing_trace(t: Tenants) -> None:
    nid = await _publish(t, t.b)
    url = f"/v1/admin/notifications/{nid}/trace"
    _refused(await t.client.get(f"{url}?tenant={t.b}", headers=t.key(t.a, "admin")), 403)
    _refused(await t.client.get(f"{url}?tenant={t.a}", headers=t.key(t.a, "admin")), 404)
    trace = _ok(await t.client.get(f"{url}?tenant={t.b}", headers=t.key(t.b, "admin"))).json()
    assert trace["tenant"] == t.b and trace["lines"][0]["user"] == t.user


async def probe_user_digests(t: Tenants) -> None:
    digest = {"key": "secret", "window_s": 600}
    await _publish(t, t.b, channels=["inbox", "email"], digest=digest)
    attacker, owner = t.key(t.a, "admin"), t.key(t.b, "admin")
    url = f"/v1/admin/users/{t.b}/{t.user}/digests"
    channels = t.hub.app_state["runner"].loop("channels")
    # A pass expands the oldest open sends first (earlier tests' may be open in this
    # run's database), and the hub's own pass, which the publish woke, may hold this one
    # (a pass of ours then skips it) until it commits: step until the digest is there.
    async with asyncio.timeout(30):
        while not (digests := _ok(await t.client.get(url, headers=owner)).json()["digests"]):
            await channels.step()
    [found] = digests
    _refused(await t.client.get(url, headers=attacker), 403)
    mine = f"/v1/admin/users/{t.a}/{t.user}/digests"
    assert _ok(await t.client.get(mine, headers=attacker)).json()["digests"] == []
    _refused(await t.client.delete(f"{url}/{found['id']}", headers=attacker), 403)
    own = f"/v1/admin/users/{t.a}/{t.user}/digests/{found['id']}"
    _refused(await t.client.delete(own, headers=attacker), 404)
    assert len(_ok(await t.client.get(url, headers=owner)).json()["digests"]) == 1
    _ok(await t.client.delete(f"{url}/{found['id']}", headers=owner), 204)
    assert _ok(await t.client.get(url, headers=owner)).json()["digests"] == []


Probe = Callable[[Tenants], Awaitable[None]]

PROBES: dict[str, Probe] = {
    "POST /v1/notifications": probe_publish,
    "DELETE /v1/notifications/{notification_id}": probe_recall,
    "GET /v1/me/notifications": probe_list,
    "GET /v1/me/notifications/counts": probe_counts,
    "POST /v1/me/notifications/read-all": probe_read_all,
    "POST /v1/me/notifications/archive-all": probe_archive_all,
    "POST /v1/me/notifications/bulk": probe_bulk,
    "GET /v1/me/notifications/{notification_id}": probe_get,
    "PATCH /v1/me/notifications/{notification_id}": probe_patch,
    "DELETE /v1/me/notifications/{notification_id}": probe_delete,
    "POST /v1/me/notifications/{notification_id}/actions/{action_id}": probe_action,
    "GET /v1/me/notifications/{notification_id}/activities": probe_activities,
    "GET /v1/me/views": probe_my_views,
    "PUT /v1/me/views/{name}": probe_my_view_put,
    "DELETE /v1/me/views/{name}": probe_my_view_delete,
    "GET /v1/admin/notifications/{notification_id}/trace": probe_routing_trace,
    "GET /v1/admin/views": probe_view_list,
    "GET /v1/admin/views/{name}": probe_view_get,
    "PUT /v1/admin/views/{name}": probe_view_put,
    "DELETE /v1/admin/views/{name}": probe_view_delete,
    "GET /v1/me/preferences": probe_preferences,
    "GET /v1/admin/preference-defaults": probe_preference_defaults,
    "PUT /v1/admin/preference-defaults": probe_preference_defaults,
    "GET /v1/admin/quiet-defaults": probe_quiet_defaults,
    "PUT /v1/admin/quiet-defaults": probe_quiet_defaults,
    "GET /v1/admin/escalation-defaults": probe_escalation_defaults,
    "PUT /v1/admin/escalation-defaults": probe_escalation_defaults,
    "GET /v1/admin/users/{tenant}/{user}/escalations": probe_escalations,
    "DELETE /v1/admin/users/{tenant}/{user}/escalations/{escalation_id}": probe_escalations,
    "PUT /v1/me/preferences": probe_preferences,
    "GET /v1/me/subscriptions": probe_subscriptions,
    "DELETE /v1/me/subscriptions": probe_cancel_subscription,
    "GET /v1/me/stream": probe_stream,
    "POST /v1/me/stream-tokens": probe_stream_token,
    "PUT /v1/admin/groups/{group}": probe_group_put,
    "DELETE /v1/admin/groups/{group}": probe_group_delete,
    "GET /v1/admin/groups": probe_group_list,
    "GET /v1/admin/groups/{group}": probe_group_get,
    "POST /v1/admin/groups/{group}/members": probe_group_members_change,
    "GET /v1/admin/groups/{group}/members": probe_group_members_list,
    "GET /v1/admin/api-keys": probe_api_keys,
    "POST /v1/admin/api-keys": probe_api_key_create,
    "DELETE /v1/admin/api-keys/{name}": probe_api_key_revoke,
    "GET /v1/admin/audit": probe_audit,
    "GET /v1/admin/topics": probe_topic_list,
    "GET /v1/admin/rules": probe_rule_list,
    "GET /v1/admin/delivery-definitions": probe_definition_list,
    "GET /v1/admin/queues": probe_queue_list,
    "GET /v1/admin/deliveries": probe_delivery_list,
    "GET /v1/admin/users/{tenant}/{user}": probe_user_lookup,
    "PUT /v1/admin/users/{tenant}/{user}": probe_user_profile_put,
    "GET /v1/me/push-key": probe_push_key,
    "POST /v1/me/push-subscriptions": probe_push_subscribe,
    "GET /v1/me/push-subscriptions": probe_push_subscriptions,
    "DELETE /v1/me/push-subscriptions/{subscription_id}": probe_push_unsubscribe,
    "POST /v1/admin/users/{tenant}/{user}/revoke-tokens": probe_user_revoke_tokens,
    "GET /v1/admin/users/{tenant}/{user}/digests": probe_user_digests,
    "DELETE /v1/admin/users/{tenant}/{user}/digests/{digest_id}": probe_user_digests,
    "GET /v1/admin/inbox": probe_user_inbox,
    "GET /v1/admin/tail": probe_user_tail,
    "POST /v1/admin/recipients": probe_recipients_preview,
    "POST /v1/admin/rules/preview": probe_rule_preview,
    "PUT /v1/admin/topics/{topic}": probe_topic_put,
    "PATCH /v1/admin/topics/{topic}": probe_topic_patch,
    "GET /v1/admin/topics/{topic}": probe_topic_get,
    "DELETE /v1/admin/topics/{topic}": probe_topic_delete,
    "PUT /v1/admin/rules/{rule}": probe_rule_put,
    "GET /v1/admin/rules/{rule}": probe_rule_get,
    "DELETE /v1/admin/rules/{rule}": probe_rule_delete,
    "POST /v1/events": probe_event,
    "POST /v1/relationships": probe_relationship_add,
    "DELETE /v1/relationships": probe_relationship_remove,
    "GET /healthz": probe_healthz,
    "GET /readyz": probe_readyz,
    "GET /metrics": probe_metrics,
    "PUT /v1/admin/delivery-definitions/{name}": probe_definition_put,
    "GET /v1/admin/delivery-definitions/{name}": probe_definition_get,
    "POST /v1/deliveries": probe_delivery_post,
    "GET /v1/deliveries/{delivery_id}": probe_delivery_get,
    "POST /v1/deliveries/{delivery_id}/confirm": probe_delivery_confirm,
    "POST /v1/deliveries/{delivery_id}/retry": probe_delivery_retry,
    "POST /v1/delayed": probe_delayed_push,
    "GET /v1/delayed/{message_id}": probe_delayed_get,
    "DELETE /v1/delayed/{message_id}": probe_delayed_cancel,
    "GET /v1/queues/{queue}/messages": probe_consume,
    "POST /v1/queues/{queue}/messages/{message_id}/ack": probe_ack,
    "GET /v1/topics/{topic}/messages": partial(probe_consume, base="/v1/topics"),
    "POST /v1/topics/{topic}/messages/{message_id}/ack": partial(probe_ack, base="/v1/topics"),
    "POST /v1/delayed/restore": probe_restore_all,
    "POST /v1/delayed/{message_id}/restore": probe_restore_one,
}


def test_the_table_names_every_operation_once(hub_openapi: dict[str, Any]) -> None:
    operations = [
        f"{method.upper()} {path}" for path, ops in hub_openapi["paths"].items() for method in ops
    ]
    rows = table_rows()
    assert len(rows) == len(set(rows)), "a row appears twice in SECURITY.md"
    assert sorted(rows) == sorted(operations), "SECURITY.md's table and the API disagree"
    assert set(PROBES) == set(rows), "every row needs a probe here"


@pytest.fixture
def hub_openapi(settings: Any) -> dict[str, Any]:
    from notifyhub.api.app import create_app

    return dict(create_app(settings).openapi())


@pytest.mark.parametrize("operation", table_rows())
async def test_isolation(tenants: Tenants, operation: str) -> None:
    await PROBES[operation](tenants)
