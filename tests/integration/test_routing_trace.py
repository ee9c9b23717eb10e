"""A notification's routing trace: why each recipient did or did not get it."""

from __future__ import annotations

import secrets
from typing import Any

from notifyhub.settings import Settings


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def _setup(hub: Any, admin_key: str, publish_key: str, make_token: Any) -> tuple[str, str]:
    """A tenant whose group `g` holds bob and carol, bob's preferences dropping the
    `restock` category; a publish to alice and the group. Returns (tenant, id)."""
    tenant, admin = f"trace-{secrets.token_hex(4)}", _auth(admin_key)
    client = hub.client
    assert (await client.put(f"/v1/admin/groups/g?tenant={tenant}", headers=admin)).is_success
    members = {"add": ["bob", "carol"]}
    url = f"/v1/admin/groups/g/members?tenant={tenant}"
    assert (await client.post(url, json=members, headers=admin)).is_success
    drop = {"categories": {"restock": {"inbox": False, "push": False}}}
    bob = _auth(make_token("bob", tenant))
    assert (await client.put("/v1/me/preferences", json=drop, headers=bob)).is_success
    body = {
        "tenant": tenant,
        "recipients": {"users": ["alice"], "groups": ["g"]},
        "title": "Restock A-12",
        "category": "restock",
    }
    published = await client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert published.status_code == 202, published.text
    return tenant, str(published.json()["id"])


async def test_the_trace_says_who_got_it_and_why_not(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    tenant, nid = await _setup(hub, admin_key, publish_key, make_token)
    url = f"/v1/admin/notifications/{nid}/trace?tenant={tenant}"
    trace = (await hub.client.get(url, headers=_auth(admin_key))).json()
    assert trace["named"] == {"users": 1, "groups": ["g"], "topics": []}
    assert (trace["resolved"], trace["recorded"], trace["origin"]) == (3, 3, "publish")
    assert trace["outcomes"] == {
        "delivered": 2,
        "pending": 0,
        "already_held": 0,
        "dropped_by_preference": 1,
    }
    lines = {line["user"]: line for line in trace["lines"]}
    assert lines["alice"]["source"] == "user" and lines["alice"]["outcome"] == "delivered"
    assert lines["alice"]["seq"] == 1
    assert lines["bob"] == {
        "user": "bob",
        "source": "group or topic",
        "outcome": "dropped_by_preference",
        "seq": None,
        "replaced": None,
        "evicted": [],
    }

    bob = (await hub.client.get(f"{url}&user=bob", headers=_auth(admin_key))).json()
    assert [line["outcome"] for line in bob["lines"]] == ["dropped_by_preference"]
    assert bob["now"]["in_inbox"] is False and bob["now"]["streams_open"] == 0
    alice = (await hub.client.get(f"{url}&user=alice", headers=_auth(admin_key))).json()
    assert alice["now"] == {
        "in_inbox": True,
        "status": "unread",
        "archived": False,
        "snoozed_until": None,
        "expired": False,
        "streams_open": 0,
    }

    recall = f"/v1/notifications/{nid}?tenant={tenant}"
    assert (await hub.client.delete(recall, headers=_auth(publish_key))).status_code == 204
    after = (await hub.client.get(f"{url}&user=alice", headers=_auth(admin_key))).json()
    assert after["recalled_at"] is not None and after["now"]["in_inbox"] is False


async def test_an_unknown_notification_has_no_trace(hub: Any, admin_key: str) -> None:
    url = "/v1/admin/notifications/01JD3Q4M6T9W2Z8K5N7R1C0B3X/trace"
    answer = await hub.client.get(url, headers=_auth(admin_key))
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"


async def test_a_trace_keeps_lines_for_the_first_recipients_only(
    settings: Settings, start_hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    capped = settings.model_copy(update={"routing_trace_users": 2})
    async with start_hub(capped) as hub:
        tenant, nid = await _setup(hub, admin_key, publish_key, make_token)
        url = f"/v1/admin/notifications/{nid}/trace?tenant={tenant}"
        trace = (await hub.client.get(url, headers=_auth(admin_key))).json()
    assert (trace["resolved"], trace["recorded"], len(trace["lines"])) == (3, 2, 2)
    assert sum(trace["outcomes"].values()) == 3  # every recipient is counted


async def _publish(hub: Any, key: str, tenant: str, users: list[str], **fields: Any) -> str:
    body = {"tenant": tenant, "recipients": {"users": users}, "title": "t", **fields}
    published = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert published.status_code == 202, published.text
    return str(published.json()["id"])


async def _lines(hub: Any, admin_key: str, tenant: str, nid: str) -> dict[str, Any]:
    url = f"/v1/admin/notifications/{nid}/trace?tenant={tenant}"
    trace = (await hub.client.get(url, headers=_auth(admin_key))).json()
    return {line["user"]: line for line in trace["lines"]}


async def test_a_trace_names_the_copy_a_collapse_key_replaced(
    hub: Any, admin_key: str, publish_key: str
) -> None:
    tenant = f"trace-{secrets.token_hex(4)}"
    old = await _publish(hub, publish_key, tenant, ["ann"], collapse_key="build-7")
    new = await _publish(hub, publish_key, tenant, ["ann", "ben"], collapse_key="build-7")
    lines = await _lines(hub, admin_key, tenant, new)
    assert lines["ann"]["outcome"] == "delivered" and lines["ann"]["replaced"] == old
    assert lines["ben"]["replaced"] is None  # ben had no copy with that key
    assert (await _lines(hub, admin_key, tenant, old))["ann"]["replaced"] is None


async def test_a_trace_names_what_a_full_inbox_evicted(
    settings: Settings, start_hub: Any, admin_key: str, publish_key: str
) -> None:
    limits = settings.limits.model_copy(update={"items_per_user": 2})
    async with start_hub(settings.model_copy(update={"limits": limits})) as hub:
        tenant = f"trace-{secrets.token_hex(4)}"
        first = await _publish(hub, publish_key, tenant, ["cy"])
        await _publish(hub, publish_key, tenant, ["cy"])
        third = await _publish(hub, publish_key, tenant, ["cy", "di"])
        lines = await _lines(hub, admin_key, tenant, third)
    assert lines["cy"]["evicted"] == [first]  # the oldest made room for it
    assert lines["di"]["evicted"] == []
