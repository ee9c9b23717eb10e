"""Read-all and archive-all inside a view (tab): `{"view": ...}` changes exactly what the
view's list shows (with `category` and `before`, what all of them take), the counts and
the streams follow, a view the user does not have (another tenant's) is a 422 changing
nothing, and durable inbox mode replays it as it was."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import pytest
from redis.asyncio import Redis

from notifyhub.settings import Settings
from notifyhub.store.keys import Keys
from support.sse import EventReader, open_stream

BASE = "/v1/me/notifications"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Tenant:
    """A fresh tenant and its user `ana` (every tenant here has one of that name)."""

    def __init__(self, hub: Any, admin_key: str, publish_key: str, make_token: Any) -> None:
        self.name = f"vra-{secrets.token_hex(4)}"
        self.client = hub.client
        self.admin, self.publisher = _auth(admin_key), _auth(publish_key)
        self.token = str(make_token("ana", self.name))
        self.me = _auth(self.token)

    async def define(self, name: str, **view_filter: Any) -> None:
        url = f"/v1/admin/views/{name}?tenant={self.name}"
        answer = await self.client.put(url, json={"filter": view_filter}, headers=self.admin)
        assert answer.status_code == 201, answer.text

    async def publish(self, **fields: Any) -> str:
        body = {"tenant": self.name, "recipients": {"users": ["ana"]}, "title": "t", **fields}
        answer = await self.client.post("/v1/notifications", json=body, headers=self.publisher)
        assert answer.status_code == 202, answer.text
        return str(answer.json()["id"])

    async def post(self, path: str, body: dict[str, Any], status: int = 200) -> Any:
        answer = await self.client.post(f"{BASE}/{path}", json=body, headers=self.me)
        assert answer.status_code == status, answer.text
        return answer.json()

    async def ids(self, query: str) -> list[str]:
        answer = await self.client.get(f"{BASE}?{query}", headers=self.me)
        assert answer.status_code == 200, answer.text
        return [item["id"] for item in answer.json()["items"]]

    async def counts(self) -> dict[str, Any]:
        return dict((await self.client.get(f"{BASE}/counts", headers=self.me)).json())


async def _next_millisecond() -> None:
    """Return in a later millisecond than the call's (`before` cuts by milliseconds)."""
    start = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 == start:
        await asyncio.sleep(0.0005)


async def _updates_until(stream: EventReader, unread: int) -> tuple[dict[str, Any], list[str]]:
    """The stream's events up to its counts with this many unread: those counts, and the
    ids of the `update` events before them."""
    updated: list[str] = []
    while True:
        counted, before = await stream.until("counts")
        updated += [e.data["id"] for e in before if e.event == "update"]
        if counted.data["unread"] == unread:
            return dict(counted.data), updated


async def test_read_all_in_a_view_marks_only_the_views_items_of_its_own_tenant(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    a = Tenant(hub, admin_key, publish_key, make_token)
    b = Tenant(hub, admin_key, publish_key, make_token)  # the same user name, no views
    await a.define("ops", tags_any=["ops"])
    old_db = await a.publish(category="db", tags=["ops"])
    web = await a.publish(category="web", tags=["ops"])
    plain = await a.publish(category="db")  # in no view
    await _next_millisecond()
    new_db = await a.publish(category="db", tags=["ops", "x"])
    theirs = await b.publish(category="db", tags=["ops"])
    created = {
        i["id"]: i["created_at"] for i in (await a.client.get(BASE, headers=a.me)).json()["items"]
    }

    # b's ana has no view `ops` (a's is not hers): refused as the list refuses it
    for path in ("read-all", "archive-all"):
        problem = await b.post(path, {"view": "ops"}, status=422)
        assert "no view 'ops'" in problem["detail"]
    listed = await b.client.get(f"{BASE}?view=ops", headers=b.me)
    assert listed.status_code == 422
    assert await b.ids("status=unread") == [theirs]

    async with open_stream(a.client, a.token) as stream:
        await stream.until("counts")
        # view, category and before: all must hold, as the list's filters
        body = {"view": "ops", "category": "db", "before": created[new_db]}
        assert await a.post("read-all", body) == {"updated": 1}
        counted, updated = await _updates_until(stream, unread=3)
        assert updated == [old_db]
        assert counted["views"]["ops"] == {"unread": 2, "unseen": 2, "total": 3}

        assert await a.post("read-all", {"view": "ops"}) == {"updated": 2}
        counted, updated = await _updates_until(stream, unread=1)
        assert sorted(updated) == sorted([web, new_db])
        assert counted["views"]["ops"] == {"unread": 0, "unseen": 0, "total": 3}

    assert await a.ids("status=unread") == [plain]
    assert await a.ids("view=ops&status=unread") == []
    counts = await a.counts()
    assert (counts["unread"], counts["total"]) == (1, 4)
    assert counts["views"]["ops"] == {"unread": 0, "unseen": 0, "total": 3, "exact": True}
    assert await b.ids("status=unread") == [theirs]  # b's copy of the same name: untouched


async def test_archive_all_in_a_view_archives_only_the_views_items(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    a = Tenant(hub, admin_key, publish_key, make_token)
    await a.define("alarms", severity_at_least="error")
    fire = await a.publish(severity="critical")
    calm = await a.publish()
    personal = {"filter": {"categories": ["billing"]}}
    answer = await a.client.put("/v1/me/views/money", json=personal, headers=a.me)
    assert answer.status_code == 201, answer.text
    bill = await a.publish(category="billing")

    assert await a.post("archive-all", {"view": "alarms"}) == {"updated": 1}
    assert await a.ids("status=archived") == [fire]
    assert await a.post("read-all", {"view": "money"}) == {"updated": 1}  # a user's own view
    assert await a.ids("status=unread") == [calm]
    counts = await a.counts()
    assert (counts["unread"], counts["total"]) == (1, 2)
    assert counts["views"]["alarms"]["total"] == 0
    assert counts["views"]["money"] == {"unread": 0, "unseen": 0, "total": 1, "exact": True}
    assert bill in await a.ids("view=money")
    # a name no view has, and one no view can have
    assert "no view 'nope'" in (await a.post("read-all", {"view": "nope"}, 422))["detail"]
    await a.post("read-all", {"view": "Not A Name"}, 422)
    assert await a.ids("status=unread") == [calm]


@pytest.fixture
def durable_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"inbox_durability": "postgres", "inbox_changes_flush_interval_s": 3600}
    )


async def test_a_views_read_all_is_replayed_as_it_was_after_redis_lost_the_inbox(
    start_hub: Any,
    durable_settings: Settings,
    redis: Redis,
    admin_key: str,
    publish_key: str,
    make_token: Any,
) -> None:
    """Rebuilt, the copies have no view bits until the user's next read syncs them; the
    logged read-all carries the view's definition and is replayed on content. A redefined
    view later does not change what it marked."""
    async with start_hub(durable_settings) as hub:
        a = Tenant(hub, admin_key, publish_key, make_token)
        await a.define("ops", tags_any=["ops"])
        ops = await a.publish(tags=["ops"])
        other = await a.publish(tags=["dev"])
        assert await a.post("read-all", {"view": "ops"}) == {"updated": 1}
        redefined = await a.client.put(
            f"/v1/admin/views/ops?tenant={a.name}", json={"filter": {}}, headers=a.admin
        )
        assert redefined.status_code == 200, redefined.text
        await hub.app_state["views"].settled()
        assert await hub.app_state["durable"].flush_changes() > 0

        found = [k async for k in redis.scan_iter(match=durable_settings.redis_prefix + "*")]
        await redis.unlink(*found)
        epoch = Keys(durable_settings.redis_prefix).epoch
        async with asyncio.timeout(10):  # the epoch watch notices and rebuilds
            while not await redis.exists(epoch):
                await asyncio.sleep(0.05)

        assert await a.ids("status=unread") == [other]
        assert await a.ids("status=read") == [ops]
        assert (await a.counts())["views"]["ops"]["unread"] == 1  # now every copy: `other`
