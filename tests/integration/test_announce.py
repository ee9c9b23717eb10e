"""A big broadcast is announced to streams before its copies are written: each stream that
had sent everything shows the notification at once, then gets the copy's counts without a
second `notification` event, live or after a resume from the id it was given."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis
from ulid import ULID

from integration.test_inbox_store import make_notification
from integration.test_stream import open_stream, send
from notifyhub.settings import Limits, Settings
from notifyhub.store.doorbells import ANNOUNCE_MARK, DEFERRED_MARK
from notifyhub.store.inbox import InboxStore
from notifyhub.store.inbox.copies import copy_content, fresh_item
from notifyhub.store.keys import Keys

pytestmark = pytest.mark.asyncio


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Fan-outs to two users or more are announced (1,000 by default)."""
    return settings.model_copy(
        update={"limits": settings.limits.model_copy(update={"announce_at": 2})}
    )


async def waiting_at(hub: Any, user: str, seq: int, tenant: str = "default") -> None:
    """Until the user's stream waits for its doorbell, having sent `seq`."""
    async with asyncio.timeout(5):
        while not any(
            sub.cursor == seq for sub in hub.app_state["hub"]._subs.get(f"{tenant}/{user}", ())
        ):
            await asyncio.sleep(0.01)


async def _get(hub: Any, token: str, path: str) -> Any:
    response = await hub.client.get(path, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_broadcast_is_shown_before_its_copy_and_counted_once(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    token = make_token("ann-0")
    registry = hub.app_state["metrics"].registry
    sent = {"name": "notifyhub_stream_events_sent_total", "labels": {"type": "notification"}}
    async with open_stream(hub, token) as stream:
        opening = await stream.next()
        assert opening.event == "counts" and opening.seq == 0
        await waiting_at(hub, "ann-0", 0)
        before = registry.get_sample_value(**sent) or 0.0
        nid = await send(hub, publish_key, ["ann-0", "ann-1", "ann-2"], title="all hands")
        shown = await stream.next()
        counted = await stream.next()
        single = await send(hub, publish_key, ["ann-0"], title="just you")
        after = await stream.next()
    # two notification events sent, each counted once (the first shown by the hub's
    # reader at once, api/protocol.py `write_now`; the second by the stream)
    assert registry.get_sample_value(**sent) - before == 2
    # shown ahead: the id is the stream's cursor and the notification's id
    assert shown.event == "notification" and shown.id == f"0.{nid}"
    assert shown.data == await _get(hub, token, f"/v1/me/notifications/{nid}")
    # the copy's change brings its counts alone, with an id that no longer carries it
    assert counted.event == "counts" and counted.seq == 1 and counted.ahead == []
    assert counted.data == {"unread": 1, "unseen": 1, "total": 1, "seq": 1}
    assert after.event == "notification" and after.data["id"] == single and after.seq == 2


async def test_a_resume_from_an_announced_id_skips_the_copys_notification(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """A client cut off after the announcement resumes from `<seq>-<epoch>.<id>`: the copy
    (in the log by now) is not shown again, the next notification is."""
    token = make_token("res-0")
    first = await send(hub, publish_key, ["res-0"], title="before")
    async with open_stream(hub, token) as stream:
        opening = await stream.next()
        assert opening.seq == 1
        epoch = opening.epoch
        await waiting_at(hub, "res-0", 1)
        nid = await send(hub, publish_key, ["res-0", "res-1"], title="all hands")
        shown = await stream.next()
    assert shown.id == f"1-{epoch}.{nid}"
    async with open_stream(hub, token, **{"Last-Event-ID": shown.id}) as resumed:
        caught_up = await resumed.next()
        later = await send(hub, publish_key, ["res-0"], title="after")
        live = await resumed.next()
    assert caught_up.event == "counts" and caught_up.id == f"2-{epoch}"
    assert live.event == "notification" and live.data["id"] == later
    listed = await _get(hub, token, "/v1/me/notifications")
    assert [n["id"] for n in listed["items"]] == [later, nid, first]


async def test_an_id_shown_ahead_rides_on_every_id_until_its_copy_comes(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """A resume naming a notification whose copy is not in the log (yet): what the log
    holds is sent as always, each id still naming it, so a later resume still skips it."""
    token = make_token("carry-0")
    first = await send(hub, publish_key, ["carry-0"], title="one")
    pending = str(ULID())  # announced, its copy not (yet) written
    async with open_stream(hub, token, **{"Last-Event-ID": f"0.{pending}"}) as stream:
        event, _ = await stream.until("notification")
        counts = await stream.next()
    assert event.data["id"] == first
    assert event.ahead == [pending] and counts.ahead == [pending] and counts.seq == 1


async def test_a_stream_that_moved_on_does_not_take_the_announcement(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """An announcement names the seq each user had; a stream that has sent past it (as
    when the copy came through the log first) sends the copy from the log, once."""
    token = make_token("moved-0")
    async with open_stream(hub, token) as stream:
        await stream.next()
        await waiting_at(hub, "moved-0", 0)
        for sub in hub.app_state["hub"]._subs["default/moved-0"]:
            sub.cursor = 7  # as if it had sent more by the time the announcement came
        nid = await send(hub, publish_key, ["moved-0", "moved-1"], title="all hands")
        event = await stream.next()
        counts = await stream.next()
    assert event.event == "notification" and event.data["id"] == nid
    assert event.id == counts.id and event.seq == 1 and event.ahead == []


async def test_the_script_names_those_without_the_copy_with_their_seq(
    settings: Settings, redis: Redis
) -> None:
    """announce.lua on real Redis: one message, the item JSON first, then a line per user
    who does not hold the notification (a retried broadcast's earlier copies), with their
    seq and epoch; nothing for a notification whose event a preference could silence."""
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    held, new = ("default", "held"), ("default", "new")
    await store.place(make_notification(title="earlier"), [held])
    notification = make_notification(title="all hands")
    await store.place(notification, [held])  # the first attempt reached this user
    pubsub = redis.pubsub()
    await pubsub.subscribe(store.doorbells.channel_of("default/new"))
    try:
        assert await store.announce(make_notification(category="news"), [held, new]) == 0
        assert await store.announce(notification, [held, new]) == 1
        message = None
        async with asyncio.timeout(5):
            while message is None or message["type"] != "message":
                message = await pubsub.get_message(timeout=1)
    finally:
        await pubsub.aclose()
    head, *lines = message["data"].split(b"\n")
    assert head[:1] == ANNOUNCE_MARK and orjson.loads(head[1:])["id"] == notification.id
    assert lines == [b"default/new 0-"]  # one message: the category's was never sent
    position = await store.position(*held)
    assert position.seq == 2 and position.epoch  # and the held copy is untouched


@pytest.fixture
def deferred(settings: Settings) -> Settings:
    """Fan-outs to three users or more are deferred (20,000 by default)."""
    limits = settings.limits.model_copy(update={"announce_at": 2, "defer_fanout_at": 3})
    return settings.model_copy(update={"limits": limits})


async def test_a_deferred_broadcast_is_announced_by_the_streams_process(
    deferred: Settings, start_hub: Any, make_token: Any, redis: Redis
) -> None:
    """A deferred broadcast published through another process: its `%` doorbell names no
    user, so the process holding a recipient's stream names it (announce.lua on its own
    users), the stream shows it ahead of its copy and, once the pending copy is written
    and rung, gets its counts alone; a stream of a user who is not a recipient, or of
    another tenant's user of the same name, hears nothing. (The steps ingest takes, one at
    a time: a POST's own writes may ring before the announcement comes, which
    `test_a_deferred_post_is_sent_once` covers.)"""
    users = ["big-0", "big-1", "big-2"]
    notification = make_notification(title="everyone")
    refs = [("default", u) for u in users]
    store = InboxStore(redis, Keys(deferred.redis_prefix), deferred.limits)  # no hub here
    async with start_hub(deferred) as hub:
        token = make_token("big-0")
        async with (
            open_stream(hub, token) as stream,
            open_stream(hub, make_token("big-x")) as bystander,
            open_stream(hub, make_token("big-0", "globex")) as other_tenant,
        ):
            for s in (stream, bystander, other_tenant):
                await s.next()
            await waiting_at(hub, "big-0", 0)
            await waiting_at(hub, "big-0", 0, "globex")
            named = await store.announce_deferred(notification, refs)
            shown = await stream.next()
            await store.place(notification, refs, defer=True)
            await store.ring_deferred(named)
            counted = await stream.next()
            for quiet in (bystander, other_tenant):
                with pytest.raises(TimeoutError):
                    await quiet.next(timeout=0.3)
        listed = await _get(hub, token, "/v1/me/notifications")
    nid = notification.id
    assert shown.event == "notification" and shown.id == f"0.{nid}"
    assert shown.data["title"] == "everyone" and shown.data["status"] == "unread"
    assert counted.event == "counts" and counted.seq == 1 and counted.ahead == []
    assert counted.data == {"unread": 1, "unseen": 1, "total": 1, "seq": 1}
    assert [n["id"] for n in listed["items"]] == [nid]  # stored once


async def test_a_deferred_broadcast_published_here_is_announced_without_its_index(
    deferred: Settings, start_hub: Any, make_token: Any, redis: Redis
) -> None:
    """The process a deferred broadcast is published through announces it to its own
    recipients' streams while the recipient index and the `%` doorbell are written
    (`Hub.announce_here`: it knows the recipients, so one round trip): the stream shows it
    with no index in Redis yet. When the `%` doorbell comes, this process leaves it (the
    stream shows it once), and the copy brings its counts alone. A process with no stream
    of the recipients (of the same names in another tenant, or once its stream closed) has
    nothing to run."""
    users = ["here-0", "here-1", "here-2"]
    notification = make_notification(title="from here")
    refs = [("default", u) for u in users]
    keys = Keys(deferred.redis_prefix)
    elsewhere = InboxStore(redis, keys, deferred.limits)  # the index and `%`, without a hub
    async with start_hub(deferred) as hub:
        realtime = hub.app_state["hub"]
        token = make_token("here-0")
        async with open_stream(hub, token) as stream:
            await stream.next()
            await waiting_at(hub, "here-0", 0)
            body = fresh_item(copy_content(notification)[0])
            assert realtime.announce_here(notification.id, body, "default", users[1:]) is None
            assert realtime.announce_here(notification.id, body, "globex", users) is None
            announcing = realtime.announce_here(notification.id, body, "default", users)
            assert announcing is not None
            await announcing
            shown = await stream.next()
            assert not await redis.exists(keys.recipients(notification.id))
            named = await elsewhere.announce_deferred(notification, refs)
            async with asyncio.timeout(5):  # its `%` heard, and left
                while notification.id in realtime._announced_here:
                    await asyncio.sleep(0.01)
            await elsewhere.place(notification, refs, defer=True)
            await elsewhere.ring_deferred(named)
            counted = await stream.next()
            with pytest.raises(TimeoutError):
                await stream.next(timeout=0.3)
        async with asyncio.timeout(5):  # the stream gone, its user has none here
            while realtime.local_streams():
                await asyncio.sleep(0.01)
        assert realtime.announce_here(notification.id, body, "default", users) is None
        listed = await _get(hub, token, "/v1/me/notifications")
    assert shown.event == "notification" and shown.id == f"0.{notification.id}"
    assert counted.event == "counts" and counted.seq == 1 and counted.ahead == []
    assert [n["id"] for n in listed["items"]] == [notification.id]


async def test_with_another_process_listening_the_publisher_hears_its_own_doorbell(
    deferred: Settings, start_hub: Any, make_token: Any
) -> None:
    """Announcing to its own streams while the index is written shares the publishing
    process's loop with the index, which every other process's streams wait for: while
    another hub process listens, the publisher announces nothing ahead and takes its own
    `%` like the others, and both processes' streams show the broadcast once, then its
    counts. Alone again, it announces to its own streams as it writes the index."""
    refs = [("default", u) for u in ("pair-0", "pair-1", "pair-2")]
    first, second = make_notification(title="to all"), make_notification(title="again")
    asked: list[str] = []
    async with start_hub(deferred) as hub:
        store: InboxStore = hub.app_state["store"]
        announce_here = store.announce_here
        assert announce_here is not None

        def recorded(nid: str, body: bytes, tenant: str, ids: Sequence[str]) -> Any:
            asked.append(nid)
            return announce_here(nid, body, tenant, ids)

        store.announce_here = recorded
        async with (
            start_hub(deferred) as other,
            open_stream(hub, make_token("pair-0")) as mine,
            open_stream(other, make_token("pair-1")) as theirs,
        ):
            for stream in (mine, theirs):
                await stream.next()
            await waiting_at(hub, "pair-0", 0)
            await waiting_at(other, "pair-1", 0)
            named = await store.announce_deferred(first, refs)
            shown = [await mine.next(), await theirs.next()]
            await store.place(first, refs, defer=True)
            await store.ring_deferred(named)
            counted = [await mine.next(), await theirs.next()]
        assert asked == []
        assert [(e.event, e.id) for e in shown] == [("notification", f"0.{first.id}")] * 2
        assert [(c.event, c.seq, c.ahead) for c in counted] == [("counts", 1, [])] * 2

        async with asyncio.timeout(5):  # the other process's subscriptions gone with it
            while await store._heard_elsewhere():
                await asyncio.sleep(0.01)
        async with open_stream(hub, make_token("pair-0")) as stream:
            await stream.next()
            await waiting_at(hub, "pair-0", 1)
            await store.announce_deferred(second, refs)
            shown_here = await stream.next()
    assert asked == [second.id]
    shown_at = f"1-{shown_here.epoch}.{second.id}"  # after the first's copy, seq 1
    assert (shown_here.event, shown_here.id) == ("notification", shown_at)


async def test_a_deferred_post_is_sent_once(
    deferred: Settings, start_hub: Any, publish_key: str, make_token: Any
) -> None:
    """Through a POST the announcement and the ring after the writes race: the stream sends
    the notification once either way (shown ahead then its counts, or from its log), and
    the inbox holds it once."""
    async with start_hub(deferred) as hub:
        token = make_token("post-0")
        async with open_stream(hub, token) as stream:
            await stream.next()
            await waiting_at(hub, "post-0", 0)
            nid = await send(hub, publish_key, ["post-0", "post-1", "post-2"])
            event, _ = await stream.until("notification")
            counts = await stream.next()
            with pytest.raises(TimeoutError):
                await stream.next(timeout=0.3)
        listed = await _get(hub, token, "/v1/me/notifications")
    assert event.data["id"] == nid and event.id in (f"0.{nid}", f"1-{event.epoch}")
    assert counts.event == "counts" and counts.seq == 1 and counts.ahead == []
    assert [n["id"] for n in listed["items"]] == [nid]


async def test_a_deferred_broadcast_reaches_a_stream_not_caught_up_once(
    deferred: Settings, start_hub: Any, make_token: Any
) -> None:
    """A stream that has sent past the seq its process was told cannot take the
    announcement: it sends the copy from the log once its pending copy is real."""
    notification = make_notification()
    refs = [("default", u) for u in ("late-0", "late-1", "late-2")]
    async with start_hub(deferred) as hub, open_stream(hub, make_token("late-0")) as stream:
        store: InboxStore = hub.app_state["store"]
        await stream.next()
        await waiting_at(hub, "late-0", 0)
        for sub in hub.app_state["hub"]._subs["default/late-0"]:
            sub.cursor = 7  # as if it had sent more by the time the announcement came
        named = await store.announce_deferred(notification, refs)
        await asyncio.sleep(0.3)  # its announcement heard (and not taken)
        await store.place(notification, refs, defer=True)
        await store.ring_deferred(named)
        event = await stream.next()
        counts = await stream.next()
    assert event.event == "notification" and event.data["id"] == notification.id
    assert event.seq == 1 and event.ahead == [] and counts.id == event.id


async def test_a_resume_after_a_deferred_announcement_shows_it_once(
    deferred: Settings, start_hub: Any, publish_key: str, make_token: Any
) -> None:
    """Cut off right after the announcement, a client resumes from `<seq>.<id>`: its copy
    (made real by the resumed stream's read) comes as counts, not as a second event."""
    notification = make_notification()
    refs = [("default", u) for u in ("cut-0", "cut-1", "cut-2")]
    async with start_hub(deferred) as hub:
        store: InboxStore = hub.app_state["store"]
        token = make_token("cut-0")
        async with open_stream(hub, token) as stream:
            await stream.next()
            await waiting_at(hub, "cut-0", 0)
            named = await store.announce_deferred(notification, refs)
            shown = await stream.next()
        await store.place(notification, refs, defer=True)
        await store.ring_deferred(named)
        assert shown.id == f"0.{notification.id}"
        async with open_stream(hub, token, **{"Last-Event-ID": shown.id}) as resumed:
            caught_up = await resumed.next()
            later = await send(hub, publish_key, ["cut-0"], title="after")
            live = await resumed.next()
    assert caught_up.event == "counts" and caught_up.seq == 1 and caught_up.ahead == []
    assert live.event == "notification" and live.data["id"] == later


async def test_announcement_seqs_name_recipients_without_the_copy(
    settings: Settings, redis: Redis
) -> None:
    """On real Redis: `announce_deferred` writes the whole recipient index, then one `%`
    message (the item JSON, no user line); `announcement_seqs` names, of the users asked
    about, those in the index who do not hold the copy yet (a pending copy is not held:
    its seq comes later), with their seq and epoch."""
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, Limits())
    held, pending, fresh = (("default", u) for u in ("s-held", "s-pending", "s-fresh"))
    await store.place(make_notification(title="earlier"), [held, pending])
    epoch = (await store.position(*pending)).epoch
    notification, news = make_notification(title="all hands"), make_notification(category="n")
    await store.place(notification, [held])  # an earlier attempt reached this user
    pubsub = redis.pubsub()
    await pubsub.subscribe(store.doorbells.common)
    try:
        await store.announce_deferred(news, [fresh])  # indexed, never announced
        await store.announce_deferred(notification, [held, pending, fresh])
        await store.place(notification, [pending], defer=True)
        message = None
        async with asyncio.timeout(5):
            while message is None or message["type"] != "message":
                message = await pubsub.get_message(timeout=1)
    finally:
        await pubsub.aclose()
    assert message["data"][:1] == DEFERRED_MARK and b"\n" not in message["data"]
    assert orjson.loads(message["data"][1:])["id"] == notification.id
    index = await redis.smembers(keys.recipients(notification.id))
    assert index == {b"default/s-held", b"default/s-pending", b"default/s-fresh"}
    assert await redis.smembers(keys.recipients(news.id)) == {b"default/s-fresh"}
    asked = ["default/s-held", "default/s-pending", "default/s-fresh", "default/s-stranger"]
    named = dict(await store.announcement_seqs(notification.id, asked))
    assert named == {"default/s-pending": f"1-{epoch}", "default/s-fresh": "0-"}


async def test_a_deferred_index_holds_every_user_named(settings: Settings, redis: Redis) -> None:
    """The index goes in a SADD per slice of users: more users than a slice, ids with
    spaces and non-ASCII letters, each in the index exactly as named."""
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, Limits())
    users = [("default", f"bulk-{i}") for i in range(4_501)]
    users += [("default", "with space"), ("default", "ünïcode ✓"), ("acme", "bulk-0")]
    notification = make_notification(title="to all")
    await store.announce_deferred(notification, users)
    index = await redis.smembers(keys.recipients(notification.id))
    assert index == {f"{t}/{u}".encode() for t, u in users}


async def test_an_announcement_reaches_only_its_tenants_users(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """Two tenants with a user of the same name, both streaming: a broadcast in one is
    announced (and stored) for that tenant's user alone."""
    async with (
        open_stream(hub, make_token("same", "acme")) as acme,
        open_stream(hub, make_token("same", "globex")) as globex,
    ):
        for stream in (acme, globex):
            await stream.next()  # the opening counts
        for tenant in ("acme", "globex"):
            await waiting_at(hub, "same", 0, tenant)
        body = {"tenant": "acme", "recipients": {"users": ["same", "other"]}, "title": "acme only"}
        response = await hub.client.post(
            "/v1/notifications", json=body, headers={"Authorization": f"Bearer {publish_key}"}
        )
        assert response.status_code == 202, response.text
        nid = response.json()["id"]
        shown = await acme.next()
        assert shown.event == "notification" and shown.id == f"0.{nid}"
        assert shown.data["tenant"] == "acme"
        with pytest.raises(TimeoutError):
            await globex.next(timeout=0.5)
    listed = await _get(hub, make_token("same", "globex"), "/v1/me/notifications")
    assert listed["items"] == []
