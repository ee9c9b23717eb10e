"""A notification's routing trace: why each recipient did or did not get it."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from redis.asyncio import Redis

from integration.test_stream import open_stream
from notifyhub.settings import Settings
from notifyhub.store.keys import Keys
from notifyhub.store.traces import tally, writer


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
    assert lines["carol"]["source"] == "group:g"
    assert lines["bob"] == {
        "user": "bob",
        "source": "group:g",
        "outcome": "dropped_by_preference",
        "seq": None,
        "replaced": None,
        "evicted": [],
        "streamed_to": 0,
        "channels": {},
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


async def test_traces_written_together_each_read_back_whole(
    hub: Any, admin_key: str, publish_key: str, redis: Redis, settings: Settings, monkeypatch: Any
) -> None:
    """Publishes within one write-behind window share one write: a script call per
    Cluster slot and per WRITE_VALUES values (made small here, so they take several);
    every trace reads back whole, with its expiry set."""
    monkeypatch.setattr(writer, "WRITE_VALUES", 8)  # two traces a call
    tenant = f"trace-{secrets.token_hex(4)}"
    bodies = [
        {"tenant": tenant, "recipients": {"users": [f"u{i}"]}, "title": f"n{i}"} for i in range(12)
    ]
    published = await asyncio.gather(
        *(hub.client.post("/v1/notifications", json=b, headers=_auth(publish_key)) for b in bodies)
    )
    keys = Keys(settings.redis_prefix)
    for i, reply in enumerate(published):
        nid = reply.json()["id"]
        url = f"/v1/admin/notifications/{nid}/trace?tenant={tenant}"
        trace = (await hub.client.get(url, headers=_auth(admin_key))).json()
        assert trace["resolved"] == 1
        assert [(line["user"], line["outcome"]) for line in trace["lines"]] == [
            (f"u{i}", "delivered")
        ]
        assert 0 < await redis.ttl(keys.routing_trace(nid)) <= settings.routing_trace_ttl_s


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


async def test_a_line_names_the_group_or_topic_that_reached_the_user(
    hub: Any, admin_key: str, publish_key: str
) -> None:
    """The first source that reached a user is named: users named directly, then groups
    in the order named, then topics (directly, or through a group the topic lists)."""
    tenant, admin = f"trace-{secrets.token_hex(4)}", _auth(admin_key)
    client = hub.client
    for group, members in {"g1": ["gil", "hal"], "g2": ["hal", "ivy"], "g3": ["kim"]}.items():
        url = f"/v1/admin/groups/{group}?tenant={tenant}"
        assert (await client.put(url, headers=admin)).is_success
        url = f"/v1/admin/groups/{group}/members?tenant={tenant}"
        assert (await client.post(url, json={"add": members}, headers=admin)).is_success
    topic = {"users": ["jon", "ivy", "ann"], "groups": ["g3"]}
    put = await client.put(f"/v1/admin/topics/t1?tenant={tenant}", json=topic, headers=admin)
    assert put.is_success, put.text
    body = {
        "tenant": tenant,
        "recipients": {"users": ["ann"], "groups": ["g1", "g2"], "topics": ["t1"]},
        "title": "t",
    }
    published = await client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert published.status_code == 202, published.text
    lines = await _lines(hub, admin_key, tenant, published.json()["id"])
    assert {user: line["source"] for user, line in lines.items()} == {
        "ann": "user",
        "gil": "group:g1",
        "hal": "group:g1",  # in g1 and g2: the first named
        "ivy": "group:g2",  # in g2 and the topic: groups come first
        "jon": "topic:t1",
        "kim": "topic:t1",  # through the topic's group g3
    }


async def test_a_rules_recipients_name_the_rule(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    run = secrets.token_hex(3)
    rule = {"target_type": "doc", "recipients": [{"relationship": "owner", "title": "Edited"}]}
    put = await hub.client.put(f"/v1/admin/rules/edit-{run}", json=rule, headers=_auth(admin_key))
    assert put.status_code == 201, put.text
    target, user = {"type": "doc", "id": f"D-{run}"}, f"owner-{run}"
    relate = {"user": user, "relationship": "owner", "target": target}
    assert (
        await hub.client.post("/v1/relationships", json=relate, headers=_auth(publish_key))
    ).status_code == 204
    event = {"rule": f"edit-{run}", "actor": {"id": "ci", "type": "service"}, "target": target}
    fired = await hub.client.post("/v1/events", json=event, headers=_auth(publish_key))
    assert fired.status_code == 202, fired.text
    inbox = await hub.client.get("/v1/me/notifications", headers=_auth(make_token(user)))
    [item] = inbox.json()["items"]
    url = f"/v1/admin/notifications/{item['id']}/trace?user={user}"
    trace = (await hub.client.get(url, headers=_auth(admin_key))).json()
    assert trace["origin"] == f"rule:edit-{run}"
    assert [line["source"] for line in trace["lines"]] == [f"rule:edit-{run}"]


async def test_a_line_counts_the_streams_that_were_sent_the_copy(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    tenant = f"trace-{secrets.token_hex(4)}"
    async with open_stream(hub, make_token("sy", tenant)) as stream:
        assert (await stream.next()).event == "counts"
        nid = await _publish(hub, publish_key, tenant, ["sy", "tam"])
        event, _ = await stream.until("notification")
        assert event.data["id"] == nid
        lines = await _lines(hub, admin_key, tenant, nid)
        url = f"/v1/admin/notifications/{nid}/trace?tenant={tenant}&user=sy"
        alone = (await hub.client.get(url, headers=_auth(admin_key))).json()
    assert lines["sy"]["streamed_to"] == 1
    assert lines["tam"]["streamed_to"] == 0  # no stream open
    assert [line["streamed_to"] for line in alone["lines"]] == [1]
    assert alone["now"]["streams_open"] in (0, 1)  # presence is as last reported


async def test_one_flush_counts_the_streams_of_many_notifications(
    hub: Any, admin_key: str, publish_key: str, make_token: Any, monkeypatch: Any
) -> None:
    """A flush reads and adds the counts of many traces in a few script calls (two traces
    or counts a call here, so five notifications take three of each); each trace gets its
    own counts: sy has one stream, tam two."""
    monkeypatch.setattr(tally, "USERS_PER_CALL", 2)
    tenant = f"trace-{secrets.token_hex(4)}"
    sends = [["sy"], ["tam"], ["sy", "tam"], ["tam"], ["sy"]]
    sy, tam = make_token("sy", tenant), make_token("tam", tenant)
    async with open_stream(hub, sy) as s1, open_stream(hub, tam) as t1, open_stream(hub, tam) as t2:
        for stream in (s1, t1, t2):
            assert (await stream.next()).event == "counts"
        ids = [await _publish(hub, publish_key, tenant, users) for users in sends]
        for stream, user in ((s1, "sy"), (t1, "tam"), (t2, "tam")):
            for nid, users in zip(ids, sends, strict=True):
                if user in users:
                    event, _ = await stream.until("notification")
                    assert event.data["id"] == nid
        streamed = [await _lines(hub, admin_key, tenant, nid) for nid in ids]
    counted = [{user: line["streamed_to"] for user, line in lines.items()} for lines in streamed]
    assert counted == [{"sy": 1}, {"tam": 2}, {"sy": 1, "tam": 2}, {"tam": 2}, {"sy": 1}]


async def test_streams_of_every_hub_process_add_up(
    settings: Settings, start_hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    """Two hubs, a stream of the user on each, and a fan-out big enough that its doorbell
    carries the copy (the streams send it without reading the log)."""
    tenant = f"trace-{secrets.token_hex(4)}"
    users = ["uma", *(f"fan-{i}" for i in range(70))]
    token = make_token("uma", tenant)
    async with (
        start_hub(settings) as one,
        start_hub(settings) as two,
        open_stream(one, token) as first,
        open_stream(two, token) as second,
    ):
        for stream in (first, second):
            assert (await stream.next()).event == "counts"
        nid = await _publish(one, publish_key, tenant, users)
        for stream in (first, second):
            event, _ = await stream.until("notification")
            assert event.data["id"] == nid
        # the other hub's 1 s flush, maybe before the publishing hub wrote the trace behind
        # the publish (its counts are then kept for the next flush), and once after
        await two.app_state["runner"].loop("routing-trace-streams").step()
        await one.app_state["routing_traces"].flush()
        await two.app_state["runner"].loop("routing-trace-streams").step()
        lines = await _lines(one, admin_key, tenant, nid)  # the reading hub flushes its own
    assert lines["uma"]["streamed_to"] == 2
    assert lines["fan-0"]["streamed_to"] == 0


async def test_only_users_with_a_line_are_counted(
    settings: Settings,
    start_hub: Any,
    redis: Redis,
    admin_key: str,
    publish_key: str,
    make_token: Any,
) -> None:
    capped = settings.model_copy(update={"routing_trace_users": 1})
    tenant = f"trace-{secrets.token_hex(4)}"
    async with (
        start_hub(capped) as hub,
        open_stream(hub, make_token("vic", tenant)) as lined,
        open_stream(hub, make_token("wes", tenant)) as unlined,
    ):
        for stream in (lined, unlined):
            assert (await stream.next()).event == "counts"
        nid = await _publish(hub, publish_key, tenant, ["vic", "wes"])
        for stream in (lined, unlined):
            await stream.until("notification")
        lines = await _lines(hub, admin_key, tenant, nid)
    assert list(lines) == ["vic"] and lines["vic"]["streamed_to"] == 1
    fields = await redis.hkeys(Keys(settings.redis_prefix).routing_trace(nid))
    assert b"s:vic" in fields and b"s:wes" not in fields  # at most a field per line


async def test_no_counts_for_a_notification_without_a_trace(
    settings: Settings, start_hub: Any, redis: Redis, publish_key: str, make_token: Any
) -> None:
    """Traces off where it was published: a hub with them on keeps nothing for it."""
    off = settings.model_copy(update={"routing_trace_users": 0})
    tenant = f"trace-{secrets.token_hex(4)}"
    async with (
        start_hub(off) as publisher,
        start_hub(settings) as streams,
        open_stream(streams, make_token("xia", tenant)) as stream,
    ):
        assert (await stream.next()).event == "counts"
        nid = await _publish(publisher, publish_key, tenant, ["xia"])
        await stream.until("notification")
        tally = streams.app_state["hub"].streamed
        assert tally is not None and await tally.flush() == 0
    assert not await redis.exists(Keys(settings.redis_prefix).routing_trace(nid))


async def test_a_deferred_fan_out_traces_what_preferences_dropped_once_placed(
    settings: Settings, start_hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    """A deferred fan-out's trace says `pending` for every user at its 202 (preferences
    apply as each batch is written); once bob's batch is placed his line and the counts
    say what the immediate path says of him: `dropped_by_preference` (no copy was made),
    and the others stay `pending` (their copies are made by their next read)."""
    limits = settings.limits.model_copy(update={"defer_fanout_at": 2, "defer_batch": 1})
    async with start_hub(settings.model_copy(update={"limits": limits})) as hub:
        tenant, nid = await _setup(hub, admin_key, publish_key, make_token)
        await hub.app_state["fanouts"].drain()
        url = f"/v1/admin/notifications/{nid}/trace?tenant={tenant}"
        trace = (await hub.client.get(url, headers=_auth(admin_key))).json()
        bob = (await hub.client.get(f"{url}&user=bob", headers=_auth(admin_key))).json()
    assert trace["outcomes"] == {
        "delivered": 0,
        "pending": 2,
        "already_held": 0,
        "dropped_by_preference": 1,
    }
    outcomes = {line["user"]: (line["source"], line["outcome"]) for line in trace["lines"]}
    assert outcomes == {
        "alice": ("user", "pending"),
        "bob": ("group:g", "dropped_by_preference"),
        "carol": ("group:g", "pending"),
    }
    assert [line["outcome"] for line in bob["lines"]] == ["dropped_by_preference"]
    assert bob["now"]["in_inbox"] is False
