"""A scheduled notification reaches a `since` poller: its id carries the acceptance time,
but its copies arrive at its delivery, and they sort (lists, cursors, `since`) as of then,
which its `created_at` shows. A poller that moved its `since` past the acceptance before
the delivery gets it once, at its place; the stream and a resume show it once too."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.services.ingest import SCHEDULED_QUEUE
from notifyhub.settings import Settings
from notifyhub.store.keys import Keys, Queue
from support.sse import Event, EventReader, open_stream

BASE = "/v1/me/notifications"
DRIVEN = ("delayed-mover", "scheduled-notifications")
"""The hub's loops these tests stop and run a step of themselves."""


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _halt(hub: Any) -> None:
    """Stop the hub's delayed mover and scheduled consumer, and wait until their loops
    have ended: the test runs their passes (`_deliver`), nothing else delivers."""
    runner = hub.app_state["runner"]
    for name in DRIVEN:
        runner.loop(name).stop()
    names = {f"loop-{name}" for name in DRIVEN}  # (the Runner's task names)
    await asyncio.gather(*(t for t in asyncio.all_tasks() if t.get_name() in names))


async def _schedule(hub: Any, key: str, recipients: dict[str, Any], tenant: str) -> str:
    """A notification scheduled an hour ahead (`_fall_due` brings its time)."""
    body = {"tenant": tenant, "recipients": recipients, "title": "later", "delay": 3600}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    assert response.json()["scheduled_for"] is not None
    return str(response.json()["id"])


async def _fall_due(redis: Redis, settings: Settings, message_id: str, tenant: str) -> None:
    """Its time has come: its due score (due_ms * 10 + 9 - priority 0) a second ago."""
    keys = Keys(settings.redis_prefix)
    due = keys.delayed(keys.delayed_set(message_id, settings.delayed.sets)).due(
        Queue(tenant, SCHEDULED_QUEUE).key
    )
    score = (int(time.time() * 1000) - 1000) * 10 + 9
    assert await redis.zadd(due, {message_id: score}, xx=True, ch=True) == 1


async def _deliver(hub: Any) -> int:
    """The delayed worker's pass: the mover's (`run_once`), then the scheduled consumer's
    (`run_once`): how many it published."""
    runner = hub.app_state["runner"]
    await runner.loop("delayed-mover").step()
    return int(await runner.loop("scheduled-notifications").step())


async def _next_millisecond() -> None:
    """Return in a later millisecond than the call's: `since` is exclusive to the ms, so a
    copy placed in the ms of the item a poller last got is a tie no poll can break."""
    now_ms = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 <= now_ms:
        await asyncio.sleep(0.0005)


async def _publish(hub: Any, key: str, user: str, title: str) -> str:
    body = {"recipients": {"users": [user]}, "title": title}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _poll(hub: Any, me: dict[str, str], since: str) -> list[dict[str, Any]]:
    response = await hub.client.get(BASE, params={"since": since}, headers=me)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def _ids(hub: Any, me: dict[str, str], **params: Any) -> list[str]:
    """The ids of the list (every page of it, following `next_cursor`)."""
    ids: list[str] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        page = (await hub.client.get(BASE, params=query, headers=me)).json()
        ids += [item["id"] for item in page["items"]]
        if not (cursor := page["next_cursor"]):
            return ids


async def _through(stream: EventReader, last_id: str | None) -> list[Event]:
    """The events up to the `counts` whose id is `last_id`, but `counts`."""
    found: list[Event] = []
    while True:
        event = await stream.next()
        if event.event == "counts" and event.id == last_id:
            return found
        if event.event != "counts":
            found.append(event)


async def test_a_poller_past_its_acceptance_gets_it_once_at_its_delivery(
    hub: Any, publish_key: str, make_token: Any, redis: Redis, settings: Settings
) -> None:
    await _halt(hub)
    user = f"poller-{secrets.token_hex(3)}"
    token = make_token(user)
    me = _auth(token)
    early = await _publish(hub, publish_key, user, "early")
    [got] = await _poll(hub, me, "0")
    assert got["id"] == early
    since = got["created_at"]

    later = await _schedule(hub, publish_key, {"users": [user]}, "default")
    await _next_millisecond()  # `between` is created after the acceptance, in a later ms
    between = await _publish(hub, publish_key, user, "between")
    polled = await _poll(hub, me, since)  # after the POST, before the delivery
    assert [item["id"] for item in polled] == [between]
    since = polled[-1]["created_at"]  # past `later`'s id's time
    assert later < between  # (ULIDs: `later`'s id sorts first)

    async with open_stream(hub.client, token) as stream:
        start = (await stream.next()).id  # the opening `counts`
        await _fall_due(redis, settings, later, "default")
        await _next_millisecond()  # delivered in a later ms than `between` was created
        assert await _deliver(hub) == 1
        event, _ = await stream.until("notification")
        assert event.data["id"] == later
        closing, _ = await stream.until("counts")

    [arrived] = await _poll(hub, me, since)  # the next poll: it, once
    assert arrived["id"] == later and arrived["title"] == "later"
    assert arrived["created_at"] > since  # created at its delivery (RFC 3339 UTC, ms)
    assert event.data["created_at"] == arrived["created_at"]
    assert await _poll(hub, me, arrived["created_at"]) == []  # and the next: nothing

    # Everywhere else it stands where it arrived: on top, paged once, counted once.
    assert await _ids(hub, me) == [later, between, early]
    assert await _ids(hub, me, limit=1) == [later, between, early]
    assert await _ids(hub, me, since="0", limit=1) == [early, between, later]
    assert await _ids(hub, me, created_after=since) == [later]
    assert await _ids(hub, me, created_before=arrived["created_at"]) == [between, early]
    counts = (await hub.client.get(f"{BASE}/counts", headers=me)).json()
    assert (counts["total"], counts["unread"]) == (3, 3)
    item = (await hub.client.get(f"{BASE}/{later}", headers=me)).json()
    assert item["created_at"] == arrived["created_at"]

    # A stream resumed from before the delivery gets its event once, then is caught up.
    headers = {**me, "Accept": "text/event-stream", "Last-Event-ID": str(start)}
    async with hub.client.stream("GET", "/v1/me/stream", headers=headers) as response:
        replayed = await _through(EventReader(response), closing.id)
    assert [(e.event, e.data["id"]) for e in replayed] == [("notification", later)]

    # Read and deleted, it leaves the lists and the index whole.
    patched = await hub.client.patch(f"{BASE}/{later}", json={"read": True}, headers=me)
    assert patched.json()["status"] == "read"
    assert (await hub.client.delete(f"{BASE}/{later}", headers=me)).status_code == 204
    assert await _ids(hub, me) == [between, early]
    assert [i["id"] for i in await _poll(hub, me, "0")] == [early, between]


async def test_a_scheduled_message_offered_twice_writes_one_copy(
    hub: Any,
    publish_key: str,
    make_token: Any,
    redis: Redis,
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """Offered again (its consumer died before the ack), in a later millisecond: the user
    keeps the one copy, where the first offer placed it."""
    await _halt(hub)
    user = f"twice-{secrets.token_hex(3)}"
    me = _auth(make_token(user))
    later = await _schedule(hub, publish_key, {"users": [user]}, "default")
    await _fall_due(redis, settings, later, "default")
    await hub.app_state["runner"].loop("delayed-mover").step()
    queue = Queue("default", SCHEDULED_QUEUE)
    [offered] = await hub.app_state["delayed"].consume(queue, 0, 10)
    ingest = hub.app_state["ingest"]
    first: list[dict[str, Any]] = []
    for _ in range(2):
        await _next_millisecond()
        async with sessionmaker.begin() as session:
            await ingest.publish_scheduled(session, offered)
        first = first or await _poll(hub, me, "0")
    assert [item["id"] for item in first] == [later]
    assert await _poll(hub, me, "0") == first
    assert await _ids(hub, me, limit=1) == [later]
    counts = (await hub.client.get(f"{BASE}/counts", headers=me)).json()
    assert counts["total"] == 1


@pytest.fixture
def deferred(settings: Settings) -> Settings:
    """Every fan-out of 2 users or more placed after its 202, a user at a time."""
    update = {"defer_fanout_at": 2, "defer_batch": 1}
    return settings.model_copy(update={"limits": settings.limits.model_copy(update=update)})


async def test_a_scheduled_deferred_group_fan_out_reaches_every_poller_once(
    deferred: Settings,
    start_hub: Any,
    create_key: Any,
    make_token: Any,
    redis: Redis,
) -> None:
    """To a group, its fan-out deferred (placed after the publish, in batches): each
    member who polled past its acceptance gets it once at its delivery, in one tenant
    only (another tenant's member of a group of the same name gets nothing)."""
    tenant, other = f"sg-{secrets.token_hex(3)}", f"so-{secrets.token_hex(3)}"
    publish = await create_key("sched-pub", "publish", tenant)
    admin = await create_key("sched-admin", "admin", tenant)
    other_admin = await create_key("sched-admin-o", "admin", other)
    users = [f"member-{n}" for n in range(3)]
    async with start_hub(deferred) as hub:
        await _halt(hub)
        for t, key, members in ((tenant, admin, users), (other, other_admin, users[:1])):
            url = "/v1/admin/groups/crew"
            made = await hub.client.put(url, params={"tenant": t}, headers=_auth(key))
            assert made.status_code in (200, 201), made.text
            added = await hub.client.post(
                f"{url}/members", params={"tenant": t}, json={"add": members}, headers=_auth(key)
            )
            assert added.status_code == 200, added.text
        mine = {u: _auth(make_token(u, tenant=tenant)) for u in users}
        later = await _schedule(hub, publish, {"groups": ["crew"]}, tenant)
        await _next_millisecond()
        sent = await hub.client.post(
            "/v1/notifications",
            json={"tenant": tenant, "recipients": {"users": users}, "title": "between"},
            headers=_auth(publish),
        )
        assert sent.status_code == 202, sent.text
        await hub.app_state["fanouts"].drain()
        since = {}
        for user, me in mine.items():
            polled = await _poll(hub, me, "0")
            assert [item["title"] for item in polled] == ["between"]
            since[user] = polled[-1]["created_at"]

        await _fall_due(redis, deferred, later, tenant)
        await _next_millisecond()
        assert await _deliver(hub) == 1
        await hub.app_state["fanouts"].drain()
        for user, me in mine.items():
            [arrived] = await _poll(hub, me, since[user])
            assert arrived["id"] == later
            assert await _poll(hub, me, arrived["created_at"]) == []
            assert (await _ids(hub, me))[0] == later
        theirs = _auth(make_token(users[0], tenant=other))
        assert await _poll(hub, theirs, "0") == []
