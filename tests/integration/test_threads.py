"""Threads: one item per conversation. Notifications with the same `thread_key` join the
user's open thread (within its window) instead of adding items: counted once, unread
again and on top, latest activity shown, actors gathered, one event each, replayed once
on resume; read/archive/delete act on the whole thread; activities page every one."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from typing import Any

import pytest
from redis.asyncio import Redis
from ulid import ULID

from notifyhub.domain.notification import Notification
from notifyhub.settings import Limits, Settings
from notifyhub.store.inbox import InboxStore, PageQuery
from notifyhub.store.keys import Keys
from support.deliveries import unique
from support.sse import EventReader, open_stream

BASE = "/v1/me/notifications"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _publish(hub: Any, key: str, users: list[str], **fields: Any) -> str:
    body = {"recipients": {"users": users}, "title": fields.pop("title", "t"), **fields}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _comment(hub: Any, key: str, users: list[str], actor: str, n: int, **extra: Any) -> str:
    return await _publish(
        hub,
        key,
        users,
        title=f"{actor} commented on Launch plan",
        body=f"comment {n}",
        actor={"id": actor, "name": actor.title()},
        thread_key="post:p1:comments",
        **extra,
    )


def make_notification(**fields: Any) -> Notification:
    now = datetime.now(UTC)
    return Notification(
        id=str(ULID()),
        tenant="default",
        title="t",
        created_at=now,
        expires_at=now + timedelta(seconds=600),
        **fields,
    )


async def _items(hub: Any, me: dict[str, str], query: str = "") -> list[dict[str, Any]]:
    response = await hub.client.get(f"{BASE}{query}", headers=me)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def test_comments_make_one_thread_item_counted_once(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    user = unique("th")
    me = _auth(make_token(user))
    other = await _publish(hub, publish_key, [user], title="unrelated")
    actors = ["ana", "bo", "cy", "di", "ed"]
    sent = [await _comment(hub, publish_key, [user], actors[i % 5], i) for i in range(20)]
    items = await _items(hub, me)
    assert [i["id"] for i in items] == [sent[0], other]  # the thread, on top
    thread = items[0]
    assert thread["title"] == "ed commented on Launch plan" and thread["body"] == "comment 19"
    assert thread["thread"]["activity_count"] == 20
    assert thread["thread"]["key"] == "post:p1:comments"
    assert [a["id"] for a in thread["thread"]["actors"]] == ["ed", "di", "cy", "bo", "ana"]
    assert thread["thread"]["actors"][0] == {
        "type": "user",
        "id": "ed",
        "name": "Ed",
        "avatar_url": None,
    }
    counts = (await hub.client.get(f"{BASE}/counts", headers=me)).json()
    assert (counts["unread"], counts["total"]) == (2, 2)

    # read: the whole thread; a new comment makes it unread again, on top
    await hub.client.patch(f"{BASE}/{sent[0]}", json={"read": True}, headers=me)
    await hub.client.patch(f"{BASE}/{other}", json={"read": True}, headers=me)
    newer = await _publish(hub, publish_key, [user], title="newer")
    # the thread sorts by its latest activity (after `other`), before `newer`
    assert [i["id"] for i in await _items(hub, me)] == [newer, sent[0], other]
    await _comment(hub, publish_key, [user], "fay", 20)
    items = await _items(hub, me)
    assert items[0]["id"] == sent[0] and items[0]["status"] == "unread"
    assert items[0]["thread"]["activity_count"] == 21
    assert [a["id"] for a in items[0]["thread"]["actors"]][:2] == ["fay", "ed"]
    counts = (await hub.client.get(f"{BASE}/counts", headers=me)).json()
    assert (counts["unread"], counts["total"]) == (2, 3)

    # every activity, the latest first, paged
    first = (await hub.client.get(f"{BASE}/{sent[0]}/activities?limit=15", headers=me)).json()
    assert [a["body"] for a in first["items"]] == [f"comment {n}" for n in range(20, 5, -1)]
    rest = (
        await hub.client.get(
            f"{BASE}/{sent[0]}/activities?limit=15&cursor={first['next_cursor']}", headers=me
        )
    ).json()
    assert [a["body"] for a in rest["items"]] == [f"comment {n}" for n in range(5, -1, -1)]
    assert rest["next_cursor"] is None
    single = (await hub.client.get(f"{BASE}/{other}/activities", headers=me)).json()
    assert [a["id"] for a in single["items"]] == [other]

    # delete: the whole thread; the next comment starts a new one
    assert (await hub.client.delete(f"{BASE}/{sent[0]}", headers=me)).status_code == 204
    again = await _comment(hub, publish_key, [user], "gus", 21)
    items = await _items(hub, me)
    assert items[0]["id"] == again and items[0]["thread"]["activity_count"] == 1
    gone = await hub.client.get(f"{BASE}/{sent[0]}/activities", headers=me)
    assert gone.status_code == 404


async def test_the_window_closes_a_thread(hub: Any, publish_key: str, make_token: Any) -> None:
    user = unique("th-win")
    me = _auth(make_token(user))
    first = await _comment(hub, publish_key, [user], "ana", 0, thread_window_s=1)
    await _comment(hub, publish_key, [user], "bo", 1, thread_window_s=1)
    assert [i["thread"]["activity_count"] for i in await _items(hub, me)] == [2]
    await asyncio.sleep(1.1)  # the window is the first activity's creation + 1 s
    later = await _comment(hub, publish_key, [user], "cy", 2, thread_window_s=1)
    items = await _items(hub, me)
    assert [(i["id"], i["thread"]["activity_count"]) for i in items] == [(later, 1), (first, 2)]


async def test_a_fan_out_joins_every_users_thread_and_streams_one_event_each(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    users = [unique("th-fan") for _ in range(3)]
    tokens = [make_token(u) for u in users]
    first = await _comment(hub, publish_key, users, "ana", 0)
    async with open_stream(hub.client, tokens[0]) as stream:
        await stream.next()  # the opening counts
        await _comment(hub, publish_key, users, "bo", 1)
        event, before = await stream.until("update")
        assert [e.event for e in before] == []
        assert event.data["id"] == first and event.data["thread"]["activity_count"] == 2
        assert event.data["body"] == "comment 1" and event.data["status"] == "unread"
        last = event.id
        counts, _ = await stream.until("counts")
        assert counts.data["total"] == 1
    for token in tokens:
        [item] = await _items(hub, _auth(token))
        assert item["id"] == first and item["thread"]["activity_count"] == 2

    # resume: the comment made while away arrives once, then live ones
    me = _auth(tokens[0])
    await _comment(hub, publish_key, users, "cy", 2)
    headers = {**me, "Accept": "text/event-stream", "Last-Event-ID": str(last)}
    async with hub.client.stream("GET", "/v1/me/stream", headers=headers) as response:
        stream = EventReader(response)
        replayed, _ = await stream.until("update")
        assert replayed.data["thread"]["activity_count"] == 3
        await _comment(hub, publish_key, users, "di", 3)
        live, between = await stream.until("update")
        assert live.data["thread"]["activity_count"] == 4
        assert all(e.event == "counts" for e in between)


async def test_a_retried_fan_out_joins_once(redis: Redis, settings: Settings) -> None:
    """The same notification placed twice (a fan-out retried after a crash) is one
    activity; a deferred (pending) copy joins as a placed one does."""
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    users = [("default", unique("th-retry")) for _ in range(2)]
    first = make_notification(thread_key="k")
    assert await store.place(first, users) == [1, 1]
    join = make_notification(thread_key="k")
    assert await store.place(join, users[:1]) == [2]  # the crash came here
    assert await store.place(join, users) == [0, 2]  # the retry fills the gap only
    later = make_notification(thread_key="k")
    await store.placement(later, users, defer=True)
    for tenant, user in users:
        item = await store.get(tenant, user, first.id)
        assert item is not None and item.thread is not None
        assert item.thread.activity_count == 3 and item.id == first.id
        activities = await store.activities(tenant, user, first.id)
        assert [a.id for a in activities or []] == [first.id, join.id, later.id]


async def test_a_thread_past_its_window_is_retired_whole(redis: Redis, settings: Settings) -> None:
    """A new thread takes the key of one whose window passed while its item lives on:
    the old item keeps its activities (listed, and removed with it), the new one joins
    its own; deleting both leaves nothing of either in the user's hash."""
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, Limits())
    user = ("default", unique("th-retire"))
    now = datetime.now(UTC)

    def at(minutes_ago: int) -> Notification:
        created = now - timedelta(minutes=minutes_ago)
        return Notification(
            id=str(ULID.from_datetime(created)),
            tenant="default",
            title="t",
            created_at=created,
            expires_at=now + timedelta(minutes=10),
            thread_key="k",
            thread_window_s=3600,
        )

    old = [at(120), at(90)]  # a window of an hour from the first
    new = [at(30), at(0)]
    for n in [*old, *new]:
        await store.place(n, [user])
    page = await store.page(*user, PageQuery())
    assert [(i.id, i.thread and i.thread.activity_count) for i in page.items] == [
        (new[0].id, 2),
        (old[0].id, 2),
    ]
    for thread in (old, new):
        listed = await store.activities(*user, thread[0].id)
        assert [a.id for a in listed or []] == [n.id for n in thread]

    inbox = keys.inbox(*user)
    assert await store.remove(*user, [old[0].id])
    listed = await store.activities(*user, new[0].id)
    assert [a.id for a in listed or []] == [n.id for n in new]
    fields = {f.decode() for f in await redis.hkeys(inbox.items)}
    assert fields == {new[0].id, "T:k", "I:k", *(f"a:{n.id}" for n in new)}
    assert await store.remove(*user, [new[0].id])
    assert await redis.hlen(inbox.items) == 0


async def test_a_joining_activity_brings_its_own_actions(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """The thread shows the latest activity, actions included: one completed before is
    not carried over to the next activity's buttons."""
    user = unique("th-act")
    me = _auth(make_token(user))
    ok = [{"id": "ok", "label": "OK"}]
    first = await _comment(hub, publish_key, [user], "ana", 0, actions=ok)
    done = await hub.client.post(f"{BASE}/{first}/actions/ok", headers=me)
    assert done.status_code == 200 and done.json()["completed"]["action"] == "ok"
    await _comment(hub, publish_key, [user], "bo", 1, actions=[{"id": "yes", "label": "Yes"}])
    [item] = await _items(hub, me)
    assert item["completed"] is None and [a["id"] for a in item["actions"]] == ["yes"]
    again = await hub.client.post(f"{BASE}/{first}/actions/yes", headers=me)
    assert again.status_code == 200 and again.json()["completed"]["action"] == "yes"


async def test_an_action_on_an_activity_no_longer_shown_is_refused(
    redis: Redis, settings: Settings
) -> None:
    """Completed against the activity the user saw: once another joined, the store
    refuses it (a durable replay of a completion made before a later join does nothing
    either, as the join cleared it)."""
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    user = ("default", unique("th-stale"))
    first = make_notification(thread_key="k", actions=({"id": "ok", "label": "OK"},))
    await store.place(first, [user])
    item = await store.get(*user, first.id)
    assert item is not None and item.thread is not None and item.thread.latest_id == first.id
    await store.place(make_notification(thread_key="k"), [user])
    stale = await store.act(*user, first.id, 1, "ok", activity=first.id)
    assert (stale.code, stale.done) == (3, None)
    item = await store.get(*user, first.id)
    assert item is not None and item.completed is None


async def _recall(hub: Any, key: str, nid: str) -> None:
    response = await hub.client.delete(f"/v1/notifications/{nid}", headers=_auth(key))
    assert response.status_code == 204, response.text


async def _activities(hub: Any, me: dict[str, str], nid: str) -> list[str]:
    response = await hub.client.get(f"{BASE}/{nid}/activities", headers=me)
    assert response.status_code == 200, response.text
    return [a["id"] for a in response.json()["items"]]


async def _counts(hub: Any, me: dict[str, str]) -> dict[str, Any]:
    response = await hub.client.get(f"{BASE}/counts", headers=me)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_recalled_latest_activity_leaves_the_thread_showing_the_one_before(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """The item shows the previous activity again (content, category, its place in
    lists), counts one fewer, lists the activity no more, drops its actor; an open stream
    gets the whole item as an `update`; counts (a personal view's too) stay exact."""
    user = unique("th-recall")
    me = _auth(make_token(user))
    tab = {"filter": {"categories": ["alert"]}}
    assert (await hub.client.put("/v1/me/views/alerts", json=tab, headers=me)).status_code == 201
    first = await _comment(hub, publish_key, [user], "ana", 0, category="comment")
    second = await _comment(hub, publish_key, [user], "bo", 1, category="comment")
    between = await _publish(hub, publish_key, [user], title="between")
    latest = await _comment(hub, publish_key, [user], "cy", 2, category="alert")
    assert [i["id"] for i in await _items(hub, me)] == [first, between]
    assert (await _counts(hub, me))["views"]["alerts"]["total"] == 1
    async with open_stream(hub.client, make_token(user)) as stream:
        await stream.next()  # the opening counts
        await _recall(hub, publish_key, latest)
        event, _ = await stream.until("update")
        assert event.data["id"] == first and event.data["body"] == "comment 1"
        assert event.data["thread"]["activity_count"] == 2
        assert event.data["thread"]["latest_id"] == second
    items = await _items(hub, me)
    assert [i["id"] for i in items] == [between, first]  # back where comment 1 put it
    thread = items[1]
    assert (thread["title"], thread["body"]) == ("bo commented on Launch plan", "comment 1")
    assert thread["category"] == "comment"
    assert thread["thread"]["activity_count"] == 2
    assert [a["id"] for a in thread["thread"]["actors"]] == ["bo", "ana"]
    assert await _activities(hub, me, first) == [second, first]
    counts = await _counts(hub, me)
    assert (counts["unread"], counts["total"]) == (2, 2)
    assert counts["views"]["alerts"] == {"unread": 0, "unseen": 0, "total": 0, "exact": True}
    assert await _items(hub, me, "?view=alerts") == []


async def test_a_recalled_middle_or_first_activity_is_listed_no_more(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """The thread keeps showing its latest activity and its id (the first activity's,
    even once that one is recalled); the recalled ones leave its activities and count."""
    user = unique("th-mid")
    me = _auth(make_token(user))
    sent = [await _comment(hub, publish_key, [user], a, i) for i, a in enumerate("abcd")]
    await _recall(hub, publish_key, sent[1])
    [item] = await _items(hub, me)
    assert item["id"] == sent[0] and item["body"] == "comment 3"
    assert item["thread"]["activity_count"] == 3
    assert [a["id"] for a in item["thread"]["actors"]] == ["d", "c", "a"]
    assert await _activities(hub, me, sent[0]) == [sent[3], sent[2], sent[0]]
    await _recall(hub, publish_key, sent[0])
    [item] = await _items(hub, me)
    assert item["id"] == sent[0] and item["body"] == "comment 3"
    assert item["thread"]["activity_count"] == 2
    assert await _activities(hub, me, sent[0]) == [sent[3], sent[2]]
    counts = await _counts(hub, me)
    assert (counts["unread"], counts["total"]) == (1, 1)


async def test_recalling_a_threads_only_activity_removes_the_item(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    user = unique("th-only")
    me = _auth(make_token(user))
    first = await _comment(hub, publish_key, [user], "ana", 0)
    second = await _comment(hub, publish_key, [user], "bo", 1)
    await _recall(hub, publish_key, first)
    async with open_stream(hub.client, make_token(user)) as stream:
        await stream.next()  # the opening counts
        await _recall(hub, publish_key, second)
        event, _ = await stream.until("delete")
        assert event.data == {"id": first}
    assert await _items(hub, me) == []
    counts = await _counts(hub, me)
    assert (counts["unread"], counts["unseen"], counts["total"]) == (0, 0, 0)
    gone = await hub.client.get(f"{BASE}/{first}/activities", headers=me)
    assert gone.status_code == 404


async def test_a_recall_reaches_a_retired_thread(redis: Redis, settings: Settings) -> None:
    """An activity of a thread retired by a newer one with its key is found and taken out;
    dropping both threads leaves nothing in the user's hash."""
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, Limits())
    user = ("default", unique("th-rretire"))
    now = datetime.now(UTC)

    def at(minutes_ago: int) -> Notification:
        created = now - timedelta(minutes=minutes_ago)
        return Notification(
            id=str(ULID.from_datetime(created)),
            tenant="default",
            title=f"t{minutes_ago}",
            created_at=created,
            expires_at=now + timedelta(minutes=10),
            thread_key="k",
            thread_window_s=3600,
        )

    old = [at(120), at(100), at(90)]
    new = [at(30), at(0)]
    for n in [*old, *new]:
        await store.place(n, [user])
    assert await store.recall(*user, old[2].id) == 1
    item = await store.get(*user, old[0].id)
    assert item is not None and item.thread is not None
    assert (item.title, item.thread.activity_count) == ("t100", 2)
    listed = await store.activities(*user, old[0].id)
    assert [a.id for a in listed or []] == [old[0].id, old[1].id]
    assert await store.recall(*user, old[2].id) == 0  # once
    assert await store.recall(*user, new[1].id) == 1
    item = await store.get(*user, new[0].id)
    assert item is not None and item.thread is not None and item.title == "t30"
    assert await store.remove(*user, [old[0].id])
    assert await store.remove(*user, [new[0].id])
    assert await redis.hlen(keys.inbox(*user).items) == 0


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"thread_key": "x" * 201}, "thread_key"),
        ({"thread_key": "has space"}, "thread_key"),
        ({"thread_key": "k", "collapse_key": "k"}, "not both"),
        ({"thread_window_s": 60}, "needs a `thread_key`"),
        ({"thread_key": "k", "thread_window_s": 0}, "thread_window_s"),
    ],
)
async def test_bad_thread_input_is_refused(
    hub: Any, publish_key: str, make_token: Any, extra: dict[str, Any], needle: str
) -> None:
    user = unique("th-bad")
    body = {"recipients": {"users": [user]}, "title": "t", **extra}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert response.status_code == 422, response.text
    assert needle in response.text
    assert await _items(hub, _auth(make_token(user))) == []


# Every state a thread item can have: read or not, seen or not, a category, a collapse key
# (which may hold '|'), and flags in `format_state`'s order: archived, pinned, the thread's
# own `h`, snoozed, views, resurfaced (moved), an action completed.
_STATE_CASES = [
    (read_at, seen, category, ck, archived, pinned, snoozed, views, moved, done)
    for read_at in (0, 1763999000111)
    for seen in (False, True)
    for category in ("", "billing")
    for ck in ("", "k|1")
    for archived in (False, True)
    for pinned in (False, True)
    for snoozed in (0, 1764100000000)
    for views in (0, 5)
    for moved in (0, 1763999999000)
    for done in ("", "2@1763999000222")
]

_JOINED = """
local out = {}
for i = 1, #ARGV, 2 do
  local views = tonumber(ARGV[i + 1])
  local old, new, raw = joined_state(ARGV[i], {category = 'news', created_ms = 1764000000123},
                                     views >= 0 and views or nil)
  local st = parse_state(raw)
  out[#out + 1] = table.concat({old.read_at, tostring(old.seen), tostring(old.archived),
    old.snoozed, old.views, old.resurfaced, new.read_at, tostring(new.seen),
    tostring(new.archived), new.snoozed, new.views, new.resurfaced, st.read_at,
    tostring(st.seen), st.category, st.ck, tostring(st.archived), tostring(st.pinned),
    st.snoozed, st.views, st.resurfaced, st.done, tostring(st.thread)}, ' ')
end
return out
"""


def _raw_state(case: tuple[Any, ...]) -> str:
    read_at, seen, category, ck, archived, pinned, snoozed, views, moved, done = case
    flags = ("a" if archived else "") + ("p" if pinned else "") + "h"
    flags += (f"s{snoozed}" if snoozed else "") + (f"v{views}" if views else "")
    flags += (f"r{moved}" if moved else "") + (f"c{done}" if done else "")
    return f"{read_at}|{int(seen)}|{category}|{ck}\x1f{flags}"


async def test_a_join_reads_and_writes_every_thread_state_as_parse_state_would(
    redis: Redis,
) -> None:
    """`joined_state` (lua/common.lua) reads the usual thread state with one match and
    any other through `parse_state`: for every combination of state fields and flags, and
    with or without the fan-out's views, the old state it reads is the stored one, and the
    new one is unread, unseen, moved to the activity's time, in its category and views, no
    action completed, everything else kept."""
    common = (files("notifyhub.store") / "lua" / "common.lua").read_text(encoding="utf-8")
    args: list[str | int] = []
    for case in _STATE_CASES:
        for fan_out_views in (-1, 6):
            args += [_raw_state(case), fan_out_views]
    replies = await redis.eval(common + _JOINED, 0, *args)
    assert len(replies) == 2 * len(_STATE_CASES)
    for i, reply in enumerate(replies):
        case, fan_out_views = _STATE_CASES[i // 2], (-1, 6)[i % 2]
        read_at, seen, _category, ck, archived, pinned, snoozed, views, moved, _done = case
        kept_views = views if fan_out_views < 0 else fan_out_views
        expected = [
            *(read_at, seen, archived, snoozed, views, moved),  # the old state, as stored
            *(0, False, archived, snoozed, kept_views, 1764000000123),  # the new one
            # the new state as stored, parsed back
            *(0, False, "news", ck, archived, pinned, snoozed, kept_views, 1764000000123),
            *("", True),
        ]
        words = reply.decode().split(" ")
        got = [_word(w) for w in words[:14]] + [words[14], words[15]]
        got += [_word(w) for w in words[16:21]] + [words[21], _word(words[22])]
        assert got == expected, (_raw_state(case), fan_out_views)


def _word(text: str) -> int | bool | str:
    """A value as the Lua reply above spells it (booleans 'true'/'false')."""
    if text in ("true", "false"):
        return text == "true"
    return int(text) if text.lstrip("-").isdigit() else text
