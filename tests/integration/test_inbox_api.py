"""The service and inbox REST API end to end, over a real server, Redis and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

import notifyhub


def note(users: list[str], **fields: Any) -> dict[str, Any]:
    return {"recipients": {"users": users}, "title": fields.pop("title", "Restock A-12"), **fields}


async def publish(client: httpx.AsyncClient, key: str, body: dict[str, Any], **kw: Any) -> str:
    response = await client.post("/v1/notifications", json=body, headers=_auth(key), **kw)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_publish_list_get_patch_delete(hub: Any, publish_key: str, make_token: Any) -> None:
    alice = _auth(make_token("alice"))
    first = await publish(hub.client, publish_key, note(["alice"], title="one", category="restock"))
    second = await publish(hub.client, publish_key, note(["alice", "bob"], title="two"))

    page = (await hub.client.get("/v1/me/notifications", headers=alice)).json()
    assert [i["id"] for i in page["items"]] == [second, first]
    assert page["unread"] == 2 and page["next_cursor"] is None
    item = page["items"][1]
    assert item["title"] == "one" and item["status"] == "unread" and item["seen"] is False
    assert item["created_at"].endswith("Z") and item["read_at"] is None

    patched = await hub.client.patch(
        f"/v1/me/notifications/{first}", json={"read": True}, headers=alice
    )
    assert patched.status_code == 200
    assert patched.json()["status"] == "read" and patched.json()["read_at"].endswith("Z")
    counts = (await hub.client.get("/v1/me/notifications/counts", headers=alice)).json()
    assert counts == {"unread": 1, "unseen": 1, "total": 2, "views": {}}

    unread = (await hub.client.get("/v1/me/notifications?status=unread", headers=alice)).json()
    assert [i["id"] for i in unread["items"]] == [second]
    restock = (await hub.client.get("/v1/me/notifications?category=restock", headers=alice)).json()
    assert [i["id"] for i in restock["items"]] == [first]

    assert (
        await hub.client.delete(f"/v1/me/notifications/{first}", headers=alice)
    ).status_code == 204
    assert (
        await hub.client.delete(f"/v1/me/notifications/{first}", headers=alice)
    ).status_code == 404
    assert (await hub.client.get(f"/v1/me/notifications/{first}", headers=alice)).status_code == 404
    bob_counts = (
        await hub.client.get("/v1/me/notifications/counts", headers=_auth(make_token("bob")))
    ).json()
    assert bob_counts == {"unread": 1, "unseen": 1, "total": 1, "views": {}}


async def test_paging_with_cursor(hub: Any, publish_key: str, make_token: Any) -> None:
    ids = [await publish(hub.client, publish_key, note(["carol"], title=f"n{i}")) for i in range(5)]
    carol = _auth(make_token("carol"))
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await hub.client.get("/v1/me/notifications", params=params, headers=carol)).json()
        seen += [i["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))


async def test_since_polling_oldest_first(hub: Any, publish_key: str, make_token: Any) -> None:
    early = await publish(hub.client, publish_key, note(["dave"], title="early"))
    await asyncio.sleep(0.01)
    mark_ms = int(time.time() * 1000)
    await asyncio.sleep(0.01)
    later = [
        await publish(hub.client, publish_key, note(["dave"], title=f"l{i}")) for i in range(2)
    ]
    dave = _auth(make_token("dave"))
    page = (await hub.client.get(f"/v1/me/notifications?since={mark_ms}", headers=dave)).json()
    assert [i["id"] for i in page["items"]] == later
    assert early not in [i["id"] for i in page["items"]]


async def test_read_all_and_bulk(hub: Any, publish_key: str, make_token: Any) -> None:
    ids = [
        await publish(hub.client, publish_key, note(["erin"], category="a" if i % 2 else "b"))
        for i in range(4)
    ]
    erin = _auth(make_token("erin"))
    result = await hub.client.post(
        "/v1/me/notifications/read-all", json={"category": "a"}, headers=erin
    )
    assert result.json() == {"updated": 2}
    bulk = await hub.client.post(
        "/v1/me/notifications/bulk", json={"ids": ids, "seen": True}, headers=erin
    )
    assert bulk.json() == {"updated": 2}
    gone = await hub.client.post(
        "/v1/me/notifications/bulk", json={"ids": ids[:3], "delete": True}, headers=erin
    )
    assert gone.json() == {"updated": 3}
    counts = (await hub.client.get("/v1/me/notifications/counts", headers=erin)).json()
    # ids[3] was read by read-all
    assert counts == {"unread": 0, "unseen": 0, "total": 1, "views": {}}


async def test_expired_notifications_vanish_at_once(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    # 2 s, not 1: the count below must come before the expiry on a loaded machine too
    await publish(hub.client, publish_key, note(["frank"], ttl=2))
    kept = await publish(hub.client, publish_key, note(["frank"], ttl=60))
    frank = _auth(make_token("frank"))
    assert (await hub.client.get("/v1/me/notifications/counts", headers=frank)).json()["total"] == 2
    await asyncio.sleep(2.1)
    page = (await hub.client.get("/v1/me/notifications", headers=frank)).json()
    assert [i["id"] for i in page["items"]] == [kept] and page["unread"] == 1
    assert (await hub.client.get("/v1/me/notifications/counts", headers=frank)).json()["total"] == 1


async def test_collapse_key_replaces_in_place(hub: Any, publish_key: str, make_token: Any) -> None:
    await publish(hub.client, publish_key, note(["gina"], title="3 items", collapse_key="cart"))
    newest = await publish(
        hub.client, publish_key, note(["gina"], title="4 items", collapse_key="cart")
    )
    page = (await hub.client.get("/v1/me/notifications", headers=_auth(make_token("gina")))).json()
    assert [(i["id"], i["title"]) for i in page["items"]] == [(newest, "4 items")]
    assert page["unread"] == 1


async def test_idempotency_key(hub: Any, publish_key: str, make_token: Any) -> None:
    headers = {**_auth(publish_key), "Idempotency-Key": "order-42"}
    body = note(["hank"], title="once")
    first = await hub.client.post("/v1/notifications", json=body, headers=headers)
    again = await hub.client.post("/v1/notifications", json=body, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    other = await hub.client.post(
        "/v1/notifications", json=note(["hank"], title="twice"), headers=headers
    )
    assert other.status_code == 422
    assert other.headers["content-type"].startswith("application/problem+json")
    counts = (
        await hub.client.get("/v1/me/notifications/counts", headers=_auth(make_token("hank")))
    ).json()
    assert counts["total"] == 1


async def test_recall_removes_from_every_inbox(hub: Any, publish_key: str, make_token: Any) -> None:
    sent = await publish(hub.client, publish_key, note(["ivy", "jack"]))
    response = await hub.client.delete(f"/v1/notifications/{sent}", headers=_auth(publish_key))
    assert response.status_code == 204
    for user in ("ivy", "jack"):
        counts = (
            await hub.client.get("/v1/me/notifications/counts", headers=_auth(make_token(user)))
        ).json()
        assert counts["total"] == 0
    again = await hub.client.delete(f"/v1/notifications/{sent}", headers=_auth(publish_key))
    assert again.status_code == 404


async def test_groups_fan_out_one_copy_each(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    admin = _auth(admin_key)
    assert (await hub.client.put("/v1/admin/groups/replenisher", headers=admin)).status_code in (
        200,
        201,
    )
    change = {"add": ["kim", "lee", "max"]}
    assert (
        await hub.client.post("/v1/admin/groups/replenisher/members", json=change, headers=admin)
    ).status_code == 200
    body = {"recipients": {"users": ["kim"], "groups": ["replenisher"]}, "title": "Restock"}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert response.status_code == 202 and response.json()["recipients"] == 3
    for user in ("kim", "lee", "max"):
        counts = (
            await hub.client.get("/v1/me/notifications/counts", headers=_auth(make_token(user)))
        ).json()
        assert counts["total"] == 1


async def test_unknown_group_and_topic_named(hub: Any, publish_key: str) -> None:
    body = {"recipients": {"groups": ["ghosts"]}, "title": "x"}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert response.status_code == 422 and "ghosts" in response.json()["detail"]
    body = {"recipients": {"topics": ["nope"]}, "title": "x"}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert response.status_code == 422 and "nope" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"recipients": {"users": ["a"]}, "title": "x" * 201}, "title"),
        ({"recipients": {"users": ["a"]}, "title": "nul\u0000byte"}, "title"),
        ({"recipients": {"users": ["a"]}, "title": "ok", "severity": "loud"}, "severity"),
        ({"recipients": {"users": ["a"]}, "title": "ok", "data": {"k": "v" * 17000}}, "data"),
        ({"recipients": {"users": ["a"]}, "title": "ok", "user": "mallory"}, "user"),
        ({"recipients": {}, "title": "ok"}, "recipients"),
        ({"recipients": {"users": ["a"]}, "title": "ok", "ttl": 0}, "ttl"),
        ({"recipients": {"users": ["a"]}, "title": "ok", "ttl": 40_000_000}, "ttl"),
        # 2100-01-01, past the longest TTL (the field sent is named, not `ttl`)
        (
            {"recipients": {"users": ["a"]}, "title": "ok", "expires_at": 4102444800000},
            "expires_at",
        ),
    ],
)
async def test_bad_publish_is_422_naming_the_field(
    hub: Any, publish_key: str, body: dict[str, Any], field: str
) -> None:
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert response.status_code == 422, response.text
    problem = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert problem["status"] == 422 and field in problem["detail"]


async def test_lone_surrogate_is_422(hub: Any, publish_key: str) -> None:
    raw = b'{"recipients": {"users": ["a"]}, "title": "bad \\ud800 text"}'
    headers = {**_auth(publish_key), "content-type": "application/json"}
    response = await hub.client.post("/v1/notifications", content=raw, headers=headers)
    assert response.status_code == 422


async def test_patch_rejects_extra_fields_and_empty(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    sent = await publish(hub.client, publish_key, note(["nora"]))
    nora = _auth(make_token("nora"))
    for body in ({"read": True, "user": "x"}, {}, {"seen": False}):
        response = await hub.client.patch(f"/v1/me/notifications/{sent}", json=body, headers=nora)
        assert response.status_code == 422, body


async def test_limit_bounds(hub: Any, make_token: Any) -> None:
    headers = _auth(make_token("olga"))
    for limit in ("0", "101", "1000000000"):
        response = await hub.client.get(f"/v1/me/notifications?limit={limit}", headers=headers)
        assert response.status_code == 422
    bad_cursor = await hub.client.get("/v1/me/notifications?cursor=zzz", headers=headers)
    assert bad_cursor.status_code == 422


async def test_bola_other_users_ids_are_404(hub: Any, publish_key: str, make_token: Any) -> None:
    sent = await publish(hub.client, publish_key, note(["pam"]))
    intruder = _auth(make_token("quinn"))
    url = f"/v1/me/notifications/{sent}"
    assert (await hub.client.get(url, headers=intruder)).status_code == 404
    assert (await hub.client.patch(url, json={"read": True}, headers=intruder)).status_code == 404
    assert (await hub.client.delete(url, headers=intruder)).status_code == 404
    other_tenant = _auth(make_token("pam", tenant="acme"))
    assert (await hub.client.get(url, headers=other_tenant)).status_code == 404
    assert (await hub.client.get(url, headers=_auth(make_token("pam")))).status_code == 200


async def test_auth_statuses(hub: Any, publish_key: str, make_token: Any, create_key: Any) -> None:
    body = note(["rita"])
    assert (await hub.client.post("/v1/notifications", json=body)).status_code == 401
    bad = await hub.client.post("/v1/notifications", json=body, headers=_auth("nh_nope_nope"))
    assert bad.status_code == 401
    user_token = await hub.client.post(
        "/v1/notifications", json=body, headers=_auth(make_token("rita"))
    )
    assert user_token.status_code == 401
    assert (await hub.client.get("/v1/admin/groups", headers=_auth(publish_key))).status_code == 403
    bound = await create_key("bound-to-acme", "publish", "acme")
    wrong_tenant = await hub.client.post("/v1/notifications", json=body, headers=_auth(bound))
    assert wrong_tenant.status_code == 403
    right_tenant = await hub.client.post(
        "/v1/notifications", json={**body, "tenant": "acme"}, headers=_auth(bound)
    )
    assert right_tenant.status_code == 202
    assert (
        await hub.client.get("/v1/me/notifications", headers=_auth(publish_key))
    ).status_code == 401


async def test_body_too_large_is_413(hub: Any, publish_key: str) -> None:
    big = b'{"title": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    headers = {**_auth(publish_key), "content-type": "application/json"}
    response = await hub.client.post("/v1/notifications", content=big, headers=headers)
    assert response.status_code == 413


async def test_operations_endpoints(hub: Any) -> None:
    health = (await hub.client.get("/healthz")).json()
    assert health == {"status": "ok", "version": notifyhub.__version__}  # = pyproject's
    ready = await hub.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    metrics = (await hub.client.get("/metrics")).text
    assert (
        "notifyhub_notifications_ingested_total" in metrics and "notifyhub_streams_open" in metrics
    )
