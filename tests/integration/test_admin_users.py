"""The admin user lookup: counts and last seq, streams open across processes (each
process's reports), preferences, subscriptions, groups and topics, of one tenant's user."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest

from notifyhub.db.repositories import memberships
from notifyhub.settings import Settings
from notifyhub.store.keys import Keys
from notifyhub.store.presence import REPORT_SLICE, StreamPresence
from support.sse import EventReader

CreateKey = Callable[..., Awaitable[str]]


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _report(hub: Any) -> None:
    """One step of the hub's stream presence loop (as its runner would take it)."""
    await hub.app_state["runner"].loop("stream-presence").step()


async def _open_stream(stack: AsyncExitStack, hub: Any, token: str) -> EventReader:
    """A stream open until `stack` closes (keep the reader: its line iterator, collected,
    would close the response)."""
    client = await stack.enter_async_context(httpx.AsyncClient(timeout=10))
    stream = await stack.enter_async_context(
        client.stream("GET", f"{hub.base_url}/v1/me/stream", headers=_auth(token))
    )
    reader = EventReader(stream)
    assert (await reader.next()).event == "counts"
    return reader


async def _lookup(hub: Any, key: str, tenant: str, user: str) -> dict[str, Any]:
    answer = await hub.client.get(f"/v1/admin/users/{tenant}/{user}", headers=_auth(key))
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_the_user_as_the_hub_holds_them(
    hub: Any,
    create_key: CreateKey,
    make_token: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tenant = f"tu-{secrets.token_hex(3)}"
    admin = await create_key("tu", "admin", tenant)
    alice = make_token("alice", tenant)
    h = _auth(admin)
    await hub.client.put(f"/v1/admin/groups/pickers?tenant={tenant}", headers=h)
    await hub.client.post(
        f"/v1/admin/groups/pickers/members?tenant={tenant}", json={"add": ["alice"]}, headers=h
    )
    await hub.client.put(f"/v1/admin/groups/other?tenant={tenant}", headers=h)
    for topic, members in (
        ("direct", {"users": ["alice"]}),
        ("via-group", {"groups": ["pickers"]}),
        ("not-hers", {"users": ["bob"]}),
    ):
        await hub.client.put(f"/v1/admin/topics/{topic}?tenant={tenant}", json=members, headers=h)
    rule = {"target_type": "doc", "recipients": [{"relationship": "author", "title": "hi"}]}
    await hub.client.put(f"/v1/admin/rules/r1?tenant={tenant}", json=rule, headers=h)
    relate = {
        "tenant": tenant,
        "user": "alice",
        "relationship": "author",
        "target": {"type": "doc", "id": "d1"},
    }
    assert (await hub.client.post("/v1/relationships", json=relate, headers=h)).status_code == 204
    prefs = {
        "categories": {"restock": {"inbox": True, "push": False, "email": True}},
        "locale": "pt-BR",
    }
    await hub.client.put("/v1/me/preferences", json=prefs, headers=_auth(alice))
    for title in ("one", "two"):
        note = {"tenant": tenant, "recipients": {"users": ["alice"]}, "title": title}
        assert (await hub.client.post("/v1/notifications", json=note, headers=h)).status_code == 202

    found = await _lookup(hub, admin, tenant, "alice")
    assert found["counts"] == {"unread": 2, "unseen": 2, "total": 2, "views": {}}
    assert found["seq"] >= 2
    assert found["streams_open"] == 0
    assert found["preferences"] == prefs
    assert found["subscriptions"] == [
        {
            "rule": "r1",
            "target": {"type": "doc", "id": "d1"},
            "relationship": "author",
            "obtain": "push",
        }
    ]
    assert found["groups"] == ["pickers"]
    assert found["topics"] == ["direct", "via-group"]

    monkeypatch.setattr(memberships, "LIMIT", 1)  # a user of thousands: the first of each
    relate["target"] = {"type": "doc", "id": "d0"}
    assert (await hub.client.post("/v1/relationships", json=relate, headers=h)).status_code == 204
    first = await _lookup(hub, admin, tenant, "alice")
    assert [s["target"]["id"] for s in first["subscriptions"]] == ["d0"]
    assert (first["groups"], first["topics"]) == (["pickers"], ["direct"])

    nobody = await _lookup(hub, admin, tenant, "nobody")
    assert nobody["counts"]["total"] == 0 and nobody["groups"] == [] and nobody["topics"] == []
    elsewhere = await hub.client.get("/v1/admin/users/default/alice", headers=h)
    assert elsewhere.status_code == 403


async def test_streams_open_are_counted_across_processes(
    hub: Any,
    settings: Settings,
    start_hub: Any,
    create_key: CreateKey,
    make_token: Callable[..., str],
) -> None:
    tenant = f"ts-{secrets.token_hex(3)}"
    admin = await create_key("ts", "admin", tenant)
    alice = make_token("alice", tenant)
    async with AsyncExitStack() as streams:
        readers = [await _open_stream(streams, hub, alice)]
        async with start_hub(settings) as other, AsyncExitStack() as elsewhere:
            readers += [await _open_stream(elsewhere, other, alice) for _ in range(2)]
            assert (await _lookup(hub, admin, tenant, "alice"))["streams_open"] == 0
            await _report(hub)  # reports are periodic: nothing counted before them
            await _report(other)
            assert (await _lookup(hub, admin, tenant, "alice"))["streams_open"] == 3
            assert (await _lookup(other, admin, tenant, "alice"))["streams_open"] == 3
            bob = await _lookup(hub, admin, tenant, "bob")
            assert bob["streams_open"] == 0
        # `other` stopped: its streams closed and it withdrew its report
        assert (await _lookup(hub, admin, tenant, "alice"))["streams_open"] == 1
        assert len(readers) == 3
    async with asyncio.timeout(5):  # the server notices a closed stream asynchronously
        while hub.app_state["hub"].stream_count:
            await asyncio.sleep(0.02)
    await _report(hub)  # the last stream closed: the next report says so
    assert (await _lookup(hub, admin, tenant, "alice"))["streams_open"] == 0


async def test_a_dead_process_stops_counting_after_its_lease(
    hub: Any, redis: Any, create_key: CreateKey
) -> None:
    """A process that died without withdrawing: its report is ignored once its stamp in
    the `hubs` zset is older than the lease."""
    tenant = f"td-{secrets.token_hex(3)}"
    admin = await create_key("td", "admin", tenant)
    presence = hub.app_state["users"]._presence
    keys = hub.app_state["store"]._keys
    member = f"{tenant}/alice"
    await redis.hset(keys.streams(member), "dead-host:1:abc", 4)
    await redis.zadd(keys.hubs, {"dead-host:1:abc": 1})  # stamped in 1970
    assert (await _lookup(hub, admin, tenant, "alice"))["streams_open"] == 0
    now_ms = int((await redis.time())[0]) * 1000
    await redis.zadd(keys.hubs, {"dead-host:1:abc": now_ms})
    assert (await _lookup(hub, admin, tenant, "alice"))["streams_open"] == 4
    assert presence.process != "dead-host:1:abc"


async def test_reports_write_changes_and_start_over_when_redis_lost_them(
    settings: Settings, redis: Any
) -> None:
    keys = Keys(settings.redis_prefix)
    presence = StreamPresence(redis, keys, lease_s=15)
    tenant = f"tr-{secrets.token_hex(3)}"
    alice, bob = f"{tenant}/alice", f"{tenant}/bob"
    await presence.report({alice: 1, bob: 2})
    assert (await presence.count(alice), await presence.count(bob)) == (1, 2)
    await redis.hset(keys.streams(bob), presence.process, 7)  # not rewritten: unchanged
    await presence.report({alice: 2, bob: 2})
    assert (await presence.count(alice), await presence.count(bob)) == (2, 7)
    await redis.delete(keys.streams(alice), keys.streams(bob), keys.hubs)  # Redis lost it
    await presence.report({alice: 2, bob: 2})  # notices its stamp was gone
    await presence.report({alice: 2, bob: 2})  # and writes everything again
    assert (await presence.count(alice), await presence.count(bob)) == (2, 2)
    await presence.report({alice: 2})
    assert await presence.count(bob) == 0


async def test_a_report_of_many_users_takes_turns_and_writes_every_count(
    settings: Settings, redis: Any
) -> None:
    """A reconnect storm changes thousands of users in one interval: their report is
    written in slices, other tasks running between them, and every count arrives."""
    tenant = f"tm-{secrets.token_hex(3)}"
    members = [f"{tenant}/u{i}" for i in range(5 * REPORT_SLICE)]
    passes = 0
    seen_at_slices: list[int] = []

    class Watched(StreamPresence):
        def _queue_counts(self, part: Any, pipe: Any) -> None:
            seen_at_slices.append(passes)
            super()._queue_counts(part, pipe)

    async def ticker() -> None:
        nonlocal passes
        while True:
            passes += 1
            await asyncio.sleep(0)

    presence = Watched(redis, Keys(settings.redis_prefix), lease_s=15)
    ticking = asyncio.create_task(ticker())
    try:
        await presence.report(dict.fromkeys(members, 2))
    finally:
        ticking.cancel()
    assert len(seen_at_slices) == 5  # two in flight: at most two built in one loop pass
    later = seen_at_slices[2:]
    assert all(a < c for a, c in zip(seen_at_slices, later, strict=False)), seen_at_slices
    counts = [await presence.count(m) for m in members[:: REPORT_SLICE // 4]]
    assert counts == [2] * len(counts)
    await presence.report({})  # every user gone: each slice of HDELs
    assert [await presence.count(m) for m in members[::50]] == [0] * (len(members) // 50)
