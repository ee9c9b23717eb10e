"""The admin lists: topics, rules, delivery definitions, delayed queues and deliveries of
one tenant, a page at a time, with their filters; another tenant's never appear."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any, get_args

import pytest

from notifyhub.api.routers.admin_lists import StatusName
from notifyhub.domain.delivery import DeliveryStatus
from notifyhub.settings import Settings
from support.deliveries import define, post, reaching_localhost, wait_status
from support.receiver import Receiver, Reply

CreateKey = Callable[..., Awaitable[str]]


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return reaching_localhost(settings)


@pytest.fixture
async def tenant() -> str:
    return f"tl-{secrets.token_hex(3)}"


async def _all(hub: Any, key: str, path: str, field: str, **params: Any) -> list[list[Any]]:
    """Every page of a list, `limit=2` a page."""
    pages: list[list[Any]] = []
    cursor = None
    while True:
        query = {"limit": 2, **params, **({"cursor": cursor} if cursor else {})}
        answer = await hub.client.get(path, params=query, headers=_auth(key))
        assert answer.status_code == 200, answer.text
        pages.append(answer.json()[field])
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            return pages


async def test_topics_by_name_with_counts(hub: Any, create_key: CreateKey, tenant: str) -> None:
    key = await create_key("tl", "admin", tenant)
    await hub.client.put(f"/v1/admin/groups/g1?tenant={tenant}", headers=_auth(key))
    for name, members in (
        ("c", {"users": ["u1"]}),
        ("a", {"users": ["u1", "u2"], "groups": ["g1"]}),
        ("b", {}),
    ):
        url = f"/v1/admin/topics/{name}?tenant={tenant}"
        assert (await hub.client.put(url, json=members, headers=_auth(key))).status_code == 201
    pages = await _all(hub, key, "/v1/admin/topics", "topics", tenant=tenant)
    assert [[t["name"] for t in p] for p in pages] == [["a", "b"], ["c"]]
    assert pages[0][0] == {"name": "a", "tenant": tenant, "user_count": 2, "group_count": 1}
    assert pages[0][1]["user_count"] == 0 and pages[1][0]["user_count"] == 1
    other = await hub.client.get("/v1/admin/topics?tenant=elsewhere", headers=_auth(key))
    assert other.status_code == 403


async def test_rules_whole_by_name(hub: Any, create_key: CreateKey, tenant: str) -> None:
    key = await create_key("tl", "admin", tenant)
    rule = {
        "target_type": "doc",
        "recipients": [
            {"relationship": "watcher", "obtain": "pull", "title": "w"},
            {"relationship": "author", "title": "hi", "body": "b"},
        ],
        # the list showed `digest: null` and `escalate: []` for these (unlike the GET)
        "channels": ["inbox", "email"],
        "digest": {"key": "doc-changes"},
        "escalate": [{"after_s": 300, "unless": "seen", "channel": "push"}],
    }
    for name in ("r3", "r1", "r2"):
        url = f"/v1/admin/rules/{name}?tenant={tenant}"
        assert (await hub.client.put(url, json=rule, headers=_auth(key))).status_code == 201
    pages = await _all(hub, key, "/v1/admin/rules", "rules", tenant=tenant)
    assert [[r["name"] for r in p] for p in pages] == [["r1", "r2"], ["r3"]]
    for page in pages:
        for listed in page:
            url = f"/v1/admin/rules/{listed['name']}?tenant={tenant}"
            one = await hub.client.get(url, headers=_auth(key))
            assert listed == one.json()


async def test_definitions_without_secrets(
    hub: Any, create_key: CreateKey, tenant: str, receiver: Receiver
) -> None:
    key = await create_key("tl", "admin", tenant)
    for name in ("d2", "d1", "d3"):
        await define(hub.client, key, name, tenant=tenant, url=receiver.url())
    pages = await _all(hub, key, "/v1/admin/delivery-definitions", "definitions", tenant=tenant)
    assert [[d["name"] for d in p] for p in pages] == [["d1", "d2"], ["d3"]]
    assert all("secret" not in d and d["tenant"] == tenant for p in pages for d in p)


async def test_queues_count_delayed_ready_and_in_flight(
    hub: Any, create_key: CreateKey, tenant: str
) -> None:
    admin, publish = (
        await create_key("tl", "admin", tenant),
        await create_key("tp", "publish", tenant),
    )
    consume = await create_key("tc", "consume", tenant)
    for queue, delay_ms in (
        ("jobs", 3_600_000),
        ("jobs", 3_600_000),
        ("jobs", 0),
        ("jobs", 0),
        ("mail", 0),
    ):
        body = {"tenant": tenant, "queue": queue, "body": {"n": 1}, "delay_ms": delay_ms}
        answer = await hub.client.post("/v1/delayed", json=body, headers=_auth(publish))
        assert answer.status_code == 201, answer.text
    await hub.app_state["delayed"].move()  # the mover's tick: due messages become ready
    url = f"/v1/queues/jobs/messages?tenant={tenant}&max=1"
    taken = await hub.client.get(url, headers=_auth(consume))
    assert len(taken.json()["messages"]) == 1
    pages = await _all(hub, admin, "/v1/admin/queues", "queues", tenant=tenant)
    assert len(pages) == 1
    jobs, mail = pages[0]
    assert {k: v for k, v in jobs.items() if k != "oldest_age_ms"} == {
        "tenant": tenant,
        "name": "jobs",
        "depth": 3,
        "delayed": 2,
        "ready": 1,
        "in_flight": 1,
    }
    assert jobs["oldest_age_ms"] >= 0
    assert (mail["name"], mail["depth"], mail["ready"], mail["in_flight"]) == ("mail", 1, 1, 0)
    elsewhere = await hub.client.get("/v1/admin/queues?tenant=default", headers=_auth(admin))
    assert elsewhere.status_code == 403


async def test_an_emptied_queue_leaves_the_list_until_a_push(
    hub: Any, create_key: CreateKey, tenant: str
) -> None:
    """The queue-name lists the mover walks grew with every name ever pushed to: the
    mover now drops a queue it finds with nothing delayed, ready or in flight, that
    tenant's only (another tenant's queue of the same name stays)."""
    other = f"tl-{secrets.token_hex(3)}"
    admin, publish, consume = (
        await create_key("tl", "admin", tenant),
        await create_key("tp", "publish", tenant),
        await create_key("tc", "consume", tenant),
    )
    other_admin, other_publish = (
        await create_key("ol", "admin", other),
        await create_key("op", "publish", other),
    )
    mover = hub.app_state["delayed"]

    async def push(key: str, owner: str) -> str:
        body = {"tenant": owner, "queue": "jobs", "body": {}, "delay_ms": 0}
        answer = await hub.client.post("/v1/delayed", json=body, headers=_auth(key))
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])

    async def listed(key: str, owner: str) -> list[tuple[str, int, int]]:
        answer = await hub.client.get(f"/v1/admin/queues?tenant={owner}", headers=_auth(key))
        return [(q["name"], q["depth"], q["in_flight"]) for q in answer.json()["queues"]]

    done = await push(publish, tenant)
    await push(other_publish, other)
    await mover.move()
    url = f"/v1/queues/jobs/messages?tenant={tenant}&max=1"
    [taken] = (await hub.client.get(url, headers=_auth(consume))).json()["messages"]
    await mover.move()
    assert await listed(admin, tenant) == [("jobs", 0, 1)]  # in flight: kept
    acked = await hub.client.post(
        f"/v1/queues/jobs/messages/{done}/ack",
        params={"tenant": tenant},
        json={"receipt": taken["receipt"]},
        headers=_auth(consume),
    )
    assert acked.status_code == 204, acked.text
    await mover.move()  # (the hub's own mover may have passed already)
    assert await listed(admin, tenant) == []
    assert await listed(other_admin, other) == [("jobs", 1, 0)]
    record = await hub.client.get(  # the message's own record is not the list's
        f"/v1/delayed/{done}", params={"tenant": tenant}, headers=_auth(publish)
    )
    assert record.json()["status"] == "consumed"
    await push(publish, tenant)
    assert await listed(admin, tenant) == [("jobs", 1, 0)]


async def test_internal_queues_are_listed_only_when_asked(
    hub: Any, create_key: CreateKey, tenant: str
) -> None:
    admin, publish = await create_key("tl", "admin", tenant), await create_key("tp", "publish")
    body = {"recipients": {"users": ["later"]}, "title": "later", "tenant": tenant, "delay": 3600}
    answer = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish))
    assert answer.status_code == 202, answer.text
    queued = {"tenant": tenant, "queue": "jobs", "body": {}, "delay_ms": 3_600_000}
    answer = await hub.client.post("/v1/delayed", json=queued, headers=_auth(publish))
    assert answer.status_code == 201, answer.text
    url = f"/v1/admin/queues?tenant={tenant}"
    shown = (await hub.client.get(url, headers=_auth(admin))).json()["queues"]
    assert [q["name"] for q in shown] == ["jobs"]
    every = (await hub.client.get(f"{url}&internal=true", headers=_auth(admin))).json()
    assert [q["name"] for q in every["queues"]] == ["jobs", "notifyhub.scheduled"]


async def test_deliveries_filtered_and_paged(
    hub: Any, create_key: CreateKey, tenant: str, receiver: Receiver
) -> None:
    admin, publish = (
        await create_key("tl", "admin", tenant),
        await create_key("tp", "publish", tenant),
    )
    receiver.plan("/bad", default=Reply(status=500))
    await define(hub.client, admin, "good", tenant=tenant, url=receiver.url("/ok"))
    await define(hub.client, admin, "bad", tenant=tenant, url=receiver.url("/bad"), max_retries=0)
    sent = [await post(hub.client, publish, "good", {"n": i}, tenant) for i in range(3)]
    failed = await post(hub.client, publish, "bad", {"n": 9}, tenant)
    for delivery_id in sent:
        await wait_status(hub.client, publish, delivery_id, "sent", tenant=tenant)
    await wait_status(hub.client, publish, failed, "final_failed", tenant=tenant)

    pages = await _all(hub, admin, "/v1/admin/deliveries", "deliveries", tenant=tenant)
    ids = [d["id"] for p in pages for d in p]
    assert ids == sorted([*sent, failed], reverse=True)  # newest first
    assert all("payload" not in d for p in pages for d in p)
    bad = await _all(
        hub, admin, "/v1/admin/deliveries", "deliveries", tenant=tenant, status="final_failed"
    )
    assert [[d["id"] for d in p] for p in bad] == [[failed]]
    assert bad[0][0]["failures"] == 1 and bad[0][0]["last_error"]
    several = await _all(
        hub,
        admin,
        "/v1/admin/deliveries",
        "deliveries",
        tenant=tenant,
        status=["sent", "final_failed"],
    )
    assert len([d for p in several for d in p]) == 4
    good = await _all(
        hub, admin, "/v1/admin/deliveries", "deliveries", tenant=tenant, definition="good"
    )
    assert sorted(d["id"] for p in good for d in p) == sorted(sent)
    later = await _all(
        hub,
        admin,
        "/v1/admin/deliveries",
        "deliveries",
        tenant=tenant,
        since="9999-01-01T00:00:00Z",
    )
    assert later == [[]]
    earlier = await _all(
        hub,
        admin,
        "/v1/admin/deliveries",
        "deliveries",
        tenant=tenant,
        until="2000-01-01T00:00:00Z",
    )
    assert earlier == [[]]
    unknown = await hub.client.get(
        f"/v1/admin/deliveries?tenant={tenant}&status=lost", headers=_auth(admin)
    )
    assert unknown.status_code == 422


def test_the_status_filter_names_every_status() -> None:
    assert set(get_args(StatusName)) == {s.value for s in DeliveryStatus}
