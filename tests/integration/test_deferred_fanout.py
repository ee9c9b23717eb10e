"""Deferred copies (big fan-outs): a pending copy reads exactly like a delivered one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis

from integration.test_inbox_store import make_notification
from integration.test_scheduled_since import _next_millisecond, _poll
from integration.test_stream import open_stream, send
from notifyhub.settings import Limits, Settings
from notifyhub.store.changes import NotificationChange
from notifyhub.store.inbox import PENDING_PLACE_AT, InboxStore, PageQuery
from notifyhub.store.keys import Keys


async def _pending(redis: Redis, settings: Any, user: str) -> int:
    return int(await redis.llen(Keys(settings.redis_prefix).inbox("default", user).pend))


async def test_a_pending_copy_reads_as_delivered(redis: Redis, settings: Any) -> None:
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    note = make_notification(title="to many", body="b", category="news")
    users = [("default", "pa"), ("default", "pb")]
    assert await store.place(note, users, defer=True) == [1, 1]
    assert await _pending(redis, settings, "pa") == 1  # written as pending, not as a copy

    page = await store.page("default", "pa", PageQuery())
    assert [(i.id, i.title, i.body, i.category, i.status) for i in page.items] == [
        (note.id, "to many", "b", "news", "unread")
    ]
    assert await _pending(redis, settings, "pa") == 0
    counts, seq = await store.counts("default", "pa")
    assert (counts.total, counts.unread, counts.unseen, seq) == (1, 1, 1, 1)

    # A stream's read places too, and sees a live notification event with its content.
    changes = await store.changes("default", "pb", 0, 10)
    assert changes.seq == 1
    [change] = changes.entries
    assert isinstance(change.entry, NotificationChange) and change.entry.id == note.id
    assert not change.entry.quiet and change.content is not None


async def test_pending_copies_keep_delivery_order(redis: Redis, settings: Any) -> None:
    """Copies left pending place before a later copy is stored: seqs follow delivery."""
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    first, second, third = (make_notification(title=t) for t in ("1", "2", "3"))
    user = [("default", "order")]
    await store.place(first, user, defer=True)
    await store.place(second, user)
    await store.place(third, user, defer=True)
    changes = await store.changes("default", "order", 0, 10)
    assert [(c.entry.id, c.entry.seq) for c in changes.entries] == [
        (first.id, 1),
        (second.id, 2),
        (third.id, 3),
    ]


async def test_preferences_apply_to_pending_copies(redis: Redis, settings: Any) -> None:
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    await store.set_preferences("default", "no-promo", {"promo": "00"})
    await store.set_preferences("default", "quiet-promo", {"promo": "10"})
    users = [("default", "no-promo"), ("default", "quiet-promo")]
    promo = make_notification(category="promo")
    assert await store.place(promo, users, defer=True) == [-1, 1]
    assert (await store.page("default", "no-promo", PageQuery())).items == []
    [change] = (await store.changes("default", "quiet-promo", 0, 10)).entries
    assert isinstance(change.entry, NotificationChange)
    assert change.entry.id == promo.id and change.entry.quiet
    # Critical notifications reach an inbox whose preferences drop the category.
    alarm = make_notification(category="promo", severity="critical")
    assert await store.place(alarm, users[:1], defer=True) == [1]
    assert [i.id for i in (await store.page("default", "no-promo", PageQuery())).items] == [
        alarm.id
    ]


async def test_a_copy_that_expires_while_pending_never_appears(redis: Redis, settings: Any) -> None:
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    short, long = make_notification(ttl_s=1), make_notification(ttl_s=600)
    await store.place(short, [("default", "late")], defer=True)
    await store.place(long, [("default", "late")], defer=True)
    await asyncio.sleep(1.1)
    changes = await store.changes("default", "late", 0, 10)
    assert [c.entry.id for c in changes.entries] == [long.id]  # no notify-then-delete
    counts, _ = await store.counts("default", "late")
    assert counts.total == 1


async def test_a_repeated_pending_copy_is_stored_once(redis: Redis, settings: Any) -> None:
    """A retried fan-out (or a redelivered scheduled one) may push an id twice."""
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    note = make_notification()
    await store.place(note, [("default", "twice")], defer=True)
    assert await store.place(note, [("default", "twice")], defer=True) == [2]
    counts, seq = await store.counts("default", "twice")
    assert (counts.total, seq) == (1, 1)


async def test_the_writer_places_long_pending_lists(redis: Redis, settings: Any) -> None:
    """A user who reads nothing holds at most PENDING_PLACE_AT pending copies; placing
    them honours the inbox cap (oldest dropped, counted as evictions)."""
    evicted: list[int] = []
    cap = PENDING_PLACE_AT - 4
    store = InboxStore(
        redis,
        Keys(settings.redis_prefix),
        Limits(items_per_user=cap),
        on_evicted=evicted.append,
    )
    notes = [make_notification(title=str(i)) for i in range(PENDING_PLACE_AT + 1)]
    for note in notes:
        await store.place(note, [("default", "away")], defer=True)
    assert await _pending(redis, settings, "away") == 0
    page = await store.page("default", "away", PageQuery(limit=100))
    assert [i.id for i in page.items] == [n.id for n in reversed(notes[-cap:])]
    assert sum(evicted) == len(notes) - cap


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Every fan-out of 2 or more users is deferred."""
    limits = settings.limits.model_copy(update={"defer_fanout_at": 2})
    return settings.model_copy(update={"limits": limits})


async def test_a_deferred_publish_reaches_streams_and_lists(
    hub: Any, publish_key: str, make_token: Any, redis: Redis, settings: Any
) -> None:
    headers = {"Authorization": f"Bearer {publish_key}"}
    async with open_stream(hub, make_token("dora")) as stream:
        assert (await stream.next()).event == "counts"
        body = {"recipients": {"users": ["dora", "eli"]}, "title": "everyone"}
        response = await hub.client.post("/v1/notifications", json=body, headers=headers)
        assert response.status_code == 202 and response.json()["recipients"] == 2
        sent = response.json()["id"]
        await hub.app_state["fanouts"].drain()  # its copies are written after the 202
        assert await _pending(redis, settings, "eli") == 1
        event, _ = await stream.until("notification")
        assert event.data["id"] == sent and event.data["title"] == "everyone"
        counts = await stream.next()
        assert counts.event == "counts" and counts.data["unread"] == 1
    listing = await hub.client.get(
        "/v1/me/notifications", headers={"Authorization": f"Bearer {make_token('eli')}"}
    )
    assert [i["id"] for i in listing.json()["items"]] == [sent]


async def _gets_it_once(hub: Any, me: dict[str, str], first: dict[str, Any], late: str) -> None:
    """The poller's next poll, since `first`, gets the late broadcast (a later ms than
    `first`'s as its `created_at`), and the poll after it nothing; the list shows both,
    the broadcast as the newer."""
    [arrived] = await _poll(hub, me, first["created_at"])
    assert arrived["id"] == late
    assert arrived["created_at"] > first["created_at"]
    assert await _poll(hub, me, arrived["created_at"]) == []
    listed = await hub.client.get("/v1/me/notifications", headers=me)
    assert [i["id"] for i in listed.json()["items"]] == [late, first["id"]]


async def test_a_since_poller_past_its_time_before_its_batch_gets_it_once(
    hub: Any, publish_key: str, make_token: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poller that got a newer notification, and so moved its `since` past a deferred
    broadcast's time, before the broadcast's batch was written: its copies sorted by the
    id, and no `since` poll ever returned it. They are created as their batch is written:
    the next poll gets it, once, and shows that time as its `created_at` (a later ms
    than the one before it, which the list and the poll agree on)."""
    fanouts = hub.app_state["fanouts"]
    place, written = fanouts._place, asyncio.Event()

    async def after_the_poll(fanout: Any) -> None:  # the batch waits for the first poll
        await written.wait()
        await place(fanout)

    monkeypatch.setattr(fanouts, "_place", after_the_poll)
    me = {"Authorization": f"Bearer {make_token('poller')}"}

    broadcast = await send(hub, publish_key, ["poller", "other"], title="everyone")
    newer = await send(hub, publish_key, ["poller"], title="just you")
    [first] = await _poll(hub, me, "0")
    assert first["id"] == newer
    await _next_millisecond()  # (a batch in the ms of `first`'s is a tie no poll breaks)
    written.set()
    await fanouts.drain()
    await _gets_it_once(hub, me, first, broadcast)


async def test_a_since_poller_past_its_time_before_its_post_batch_gets_it_once(
    settings: Settings, start_hub: Any, publish_key: str, make_token: Any
) -> None:
    """The same gap in a fan-out written inside its POST (not deferred), in batches: the
    poller's batch waits behind the first two (two in flight), and a newer notification
    reaches the poller meanwhile. That batch's copy is created as it is written, after
    the newer one: the next poll gets it, once."""
    limits = settings.limits.model_copy(update={"defer_fanout_at": 0, "fanout_batch": 1})
    async with start_hub(settings.model_copy(update={"limits": limits})) as hub:
        store = hub.app_state["store"]
        placement, started, written = store.placement, asyncio.Semaphore(0), asyncio.Event()

        async def held(notification: Any, users: Any, **kwargs: Any) -> Any:
            if notification.title == "everyone" and ("default", "poller") not in users:
                started.release()
                await written.wait()  # the poller's batch waits for a slot meanwhile
            return await placement(notification, users, **kwargs)

        store.placement = held
        me = {"Authorization": f"Bearer {make_token('poller')}"}
        everyone = ["crowd-a", "crowd-b", "poller"]  # (the poller's batch is the third)
        posting = asyncio.ensure_future(send(hub, publish_key, everyone, title="everyone"))
        for _ in range(2):
            await started.acquire()
        newer = await send(hub, publish_key, ["poller"], title="just you")
        [first] = await _poll(hub, me, "0")
        assert first["id"] == newer
        await _next_millisecond()
        written.set()
        await _gets_it_once(hub, me, first, await posting)
