"""Archive, pin and tags over the REST API and the stream: what moves where, what the
counts say, and what is refused (precise problem+json, nothing changed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from notifyhub.db.models import DelayedMessage
from notifyhub.services.snooze import SNOOZE_QUEUE
from support.sse import Event, EventReader, open_stream

BASE = "/v1/me/notifications"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _publish(hub: Any, key: str, users: list[str], **fields: Any) -> str:
    body = {"recipients": {"users": users}, "title": fields.pop("title", "t"), **fields}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _ids(hub: Any, headers: dict[str, str], query: str = "") -> list[str]:
    response = await hub.client.get(f"{BASE}{query}", headers=headers)
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["items"]]


async def _counts(hub: Any, headers: dict[str, str]) -> dict[str, int]:
    return dict((await hub.client.get(f"{BASE}/counts", headers=headers)).json())


async def test_archive_leaves_the_list_and_the_counts_and_comes_back(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    me = _auth(make_token("arch"))
    old = await _publish(hub, publish_key, ["arch"], title="old")
    new = await _publish(hub, publish_key, ["arch"], title="new")
    await hub.client.patch(f"{BASE}/{old}", json={"read": True}, headers=me)

    archived = await hub.client.patch(f"{BASE}/{old}", json={"archived": True}, headers=me)
    assert archived.status_code == 200
    assert archived.json()["archived"] is True and archived.json()["status"] == "read"
    assert await _ids(hub, me) == [new]
    assert await _ids(hub, me, "?status=archived") == [old]
    assert await _counts(hub, me) == {"unread": 1, "unseen": 1, "total": 1, "views": {}}

    back = await hub.client.patch(f"{BASE}/{old}", json={"archived": False}, headers=me)
    assert back.json()["archived"] is False and back.json()["status"] == "read"  # kept
    assert await _ids(hub, me) == [new, old]
    assert await _counts(hub, me) == {"unread": 1, "unseen": 1, "total": 2, "views": {}}


async def test_archive_all_and_bulk_archive(hub: Any, publish_key: str, make_token: Any) -> None:
    me = _auth(make_token("archall"))
    a = await _publish(hub, publish_key, ["archall"], category="billing")
    b = await _publish(hub, publish_key, ["archall"], category="restock")
    c = await _publish(hub, publish_key, ["archall"], category="billing")

    done = await hub.client.post(f"{BASE}/archive-all", json={"category": "billing"}, headers=me)
    assert done.status_code == 200 and done.json() == {"updated": 2}
    assert await _ids(hub, me) == [b]
    assert sorted(await _ids(hub, me, "?status=archived")) == sorted([a, c])

    bulk = await hub.client.post(
        f"{BASE}/bulk", json={"ids": [a, c], "archived": False}, headers=me
    )
    assert bulk.json() == {"updated": 2}
    everything = await hub.client.post(f"{BASE}/archive-all", headers=me)
    assert everything.json() == {"updated": 3}
    assert await _ids(hub, me) == []
    assert await _counts(hub, me) == {"unread": 0, "unseen": 0, "total": 0, "views": {}}


async def _pages(hub: Any, headers: dict[str, str], limit: int) -> list[list[str]]:
    """Every page of the default list, `limit` at a time, following `next_cursor`."""
    pages: list[list[str]] = []
    cursor: str | None = ""
    while cursor is not None:
        query = f"?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        response = await hub.client.get(f"{BASE}{query}", headers=headers)
        assert response.status_code == 200, response.text
        pages.append([item["id"] for item in response.json()["items"]])
        cursor = response.json()["next_cursor"]
    return pages


async def test_pinned_lead_the_list_within_limit(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    me = _auth(make_token("pins"))
    ids = [await _publish(hub, publish_key, ["pins"], title=f"n{i}") for i in range(5)]
    for nid in (ids[0], ids[2]):
        pinned = await hub.client.patch(f"{BASE}/{nid}", json={"pinned": True}, headers=me)
        assert pinned.status_code == 200 and pinned.json()["pinned"] is True

    assert await _ids(hub, me, "?limit=1") == [ids[2]]  # `limit` bounds the page
    expected = [ids[2], ids[0], ids[4], ids[3], ids[1]]
    for limit in (1, 2, 3, 5):
        pages = await _pages(hub, me, limit)
        assert all(len(page) <= limit for page in pages)
        assert [nid for page in pages for nid in page] == expected  # each once, pinned first
    assert (await _pages(hub, me, 2))[:2] == [[ids[2], ids[0]], [ids[4], ids[3]]]
    assert await _ids(hub, me, "?pinned=true") == [ids[2], ids[0]]
    assert await _ids(hub, me, "?pinned=false") == [ids[4], ids[3], ids[1]]

    await hub.client.patch(f"{BASE}/{ids[2]}", json={"pinned": False}, headers=me)
    assert await _ids(hub, me, "?pinned=true") == [ids[0]]
    assert await _ids(hub, me, "?pinned=false") == [ids[4], ids[3], ids[2], ids[1]]


async def test_a_page_of_pinned_items_keeps_other_filters(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """Pinned items lead only where the other filters let them in: a category, or
    `created_before`."""
    me = _auth(make_token("pinf"))
    bill = await _publish(hub, publish_key, ["pinf"], category="billing")
    other = await _publish(hub, publish_key, ["pinf"], category="restock")
    await hub.client.patch(f"{BASE}/{bill}", json={"pinned": True}, headers=me)
    assert await _ids(hub, me, "?category=restock&limit=1") == [other]
    first = (await hub.client.get(f"{BASE}?limit=1", headers=me)).json()
    assert [i["id"] for i in first["items"]] == [bill]
    assert first["next_cursor"].startswith("pin.")
    assert await _ids(hub, me, f"?limit=1&cursor={first['next_cursor']}") == [other]
    after = first["items"][0]["created_at"]
    assert await _ids(hub, me, f"?created_after={after}") == [other]
    bad = await hub.client.get(f"{BASE}?cursor=pin.nope", headers=me)
    assert bad.status_code == 422


async def test_a_pin_past_the_limit_is_409_naming_it(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    me = _auth(make_token("pinmax"))
    ids = [await _publish(hub, publish_key, ["pinmax"], title=f"n{i}") for i in range(21)]
    for nid in ids[:20]:
        assert (
            await hub.client.patch(f"{BASE}/{nid}", json={"pinned": True}, headers=me)
        ).status_code == 200
    archived = await hub.client.patch(f"{BASE}/{ids[1]}", json={"archived": True}, headers=me)
    assert archived.json()["pinned"] is True  # an archived pin keeps its place
    refused = await hub.client.patch(
        f"{BASE}/{ids[20]}", json={"pinned": True, "read": True}, headers=me
    )
    assert refused.status_code == 409
    assert refused.headers["content-type"] == "application/problem+json"
    detail = refused.json()["detail"]
    assert refused.json()["limit"] == 20 and "20 pinned" in detail
    assert "archived and snoozed ones count" in detail
    listed = await _ids(hub, me, "?pinned=true&status=archived")
    assert listed == [ids[1]]  # where the message says they are
    item = (await hub.client.get(f"{BASE}/{ids[20]}", headers=me)).json()
    assert item["pinned"] is False and item["status"] == "unread"  # none of the PATCH happened
    # unpinning one makes room
    await hub.client.patch(f"{BASE}/{ids[0]}", json={"pinned": False}, headers=me)
    assert (
        await hub.client.patch(f"{BASE}/{ids[20]}", json={"pinned": True}, headers=me)
    ).status_code == 200


async def test_tags_and_filters_combine(hub: Any, publish_key: str, make_token: Any) -> None:
    me = _auth(make_token("tagger"))
    mention = await _publish(hub, publish_key, ["tagger"], tags=["mention"], severity="info")
    billing = await _publish(
        hub, publish_key, ["tagger"], tags=["billing", "mention"], severity="error",
        actor={"type": "user", "id": "u-7"},
    )  # fmt: skip
    plain = await _publish(hub, publish_key, ["tagger"], severity="warning")

    item = (await hub.client.get(f"{BASE}/{billing}", headers=me)).json()
    assert item["tags"] == ["billing", "mention"]
    assert await _ids(hub, me, "?tags_any=mention") == [billing, mention]
    assert await _ids(hub, me, "?tags_any=billing&tags_any=nope") == [billing]
    assert await _ids(hub, me, "?tags_all=billing&tags_all=mention") == [billing]
    assert await _ids(hub, me, "?severity_at_least=warning") == [plain, billing]
    assert await _ids(hub, me, "?actor=u-7") == [billing]
    assert await _ids(hub, me, "?tags_any=mention&severity_at_least=error") == [billing]

    created = item["created_at"]
    after = await _ids(hub, me, f"?created_after={created}")
    assert after == [plain]
    before = await _ids(hub, me, f"?created_before={created}")
    assert before == [mention]
    # the filters page like the plain list
    first = (await hub.client.get(f"{BASE}?tags_any=mention&limit=1", headers=me)).json()
    assert [i["id"] for i in first["items"]] == [billing]
    rest = await _ids(hub, me, f"?tags_any=mention&limit=1&cursor={first['next_cursor']}")
    assert rest == [mention]


async def test_bad_input_is_refused_and_changes_nothing(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    me = _auth(make_token("bad"))
    eleven = [f"t{i}" for i in range(11)]
    for tags, why in ((eleven, "at most 10"), (["Upper"], "pattern"), (["a", "a"], "distinct")):
        body = {"recipients": {"users": ["bad"]}, "title": "t", "tags": tags}
        response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
        assert response.status_code == 422, tags
        assert response.headers["content-type"] == "application/problem+json"
        assert "tags" in response.text and why in response.text
    assert await _ids(hub, me) == []

    mine = await _publish(hub, publish_key, ["bad"])
    theirs = await _publish(hub, publish_key, ["other"])
    for body in ({"archived": True}, {"pinned": True}):
        refused = await hub.client.patch(f"{BASE}/{theirs}", json=body, headers=me)
        assert refused.status_code == 404 and refused.json()["status"] == 404
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["detail"] == f"no notification {theirs}"
    # in bulk, ids the user does not have are skipped (BulkRequest.ids): not counted
    only_theirs = {"ids": [theirs], "archived": True}
    skipped = await hub.client.post(f"{BASE}/bulk", json=only_theirs, headers=me)
    assert skipped.status_code == 200 and skipped.json() == {"updated": 0}
    mixed = {"ids": [theirs, mine], "archived": True}
    bulk = await hub.client.post(f"{BASE}/bulk", json=mixed, headers=me)
    assert bulk.status_code == 200 and bulk.json() == {"updated": 1}  # mine only
    assert await _ids(hub, me, "?status=archived") == [mine]
    other = _auth(make_token("other"))
    item = (await hub.client.get(f"{BASE}/{theirs}", headers=other)).json()
    assert item["archived"] is False and item["pinned"] is False
    assert await _ids(hub, other) == [theirs]
    assert await _counts(hub, other) == {"unread": 1, "unseen": 1, "total": 1, "views": {}}
    for body in ({"archived": "yes"}, {"pinned": None}, {"archived": True, "x": 1}, {}):
        refused = await hub.client.patch(f"{BASE}/{mine}", json=body, headers=me)
        assert refused.status_code == 422, body
    many = "&".join(f"tags_any=t{i}" for i in range(11))
    assert (await hub.client.get(f"{BASE}?{many}", headers=me)).status_code == 422
    assert (await hub.client.get(f"{BASE}?status=sleeping", headers=me)).status_code == 422


async def test_archive_and_pin_are_streamed_and_replayed_once(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    token = make_token("live-arch")
    me = _auth(token)
    async with open_stream(hub.client, token) as stream:
        sent = await _publish(hub, publish_key, ["live-arch"])
        await stream.until("notification")
        last = (await stream.next()).id
    await hub.client.patch(f"{BASE}/{sent}", json={"pinned": True}, headers=me)
    await hub.client.patch(f"{BASE}/{sent}", json={"archived": True}, headers=me)
    headers = {**me, "Accept": "text/event-stream", "Last-Event-ID": str(last)}
    async with hub.client.stream("GET", "/v1/me/stream", headers=headers) as response:
        stream = EventReader(response)
        first, _ = await stream.until("update")
        second, _ = await stream.until("update")
        assert (first.data["pinned"], first.data["archived"]) == (True, False)
        assert (second.data["pinned"], second.data["archived"]) == (True, True)
        await hub.client.patch(f"{BASE}/{sent}", json={"archived": False}, headers=me)
        live, between = await stream.until("update")  # no replayed update before it
        assert live.data["archived"] is False and live.data["id"] == sent
        assert all(e.event == "counts" for e in between)
        assert (live.seq or 0) > (second.seq or 0)


async def _changes(stream: EventReader, n: int) -> list[Event]:
    """The next `n` events other than `counts` (each change is followed by its counts)."""
    found: list[Event] = []
    while len(found) < n:
        event = await stream.next()
        if event.event != "counts":
            found.append(event)
    return found


async def _replayed_through(stream: EventReader, last_id: str | None) -> list[Event]:
    """What a resumed stream sends before the `counts` closing its catch-up at `last_id`:
    every event but `counts` (a duplicate, a `reset` or a missing change shows here)."""
    found: list[Event] = []
    while True:
        event = await stream.next()
        if event.event == "counts" and event.id == last_id:
            return found
        if event.event != "counts":
            found.append(event)


@asynccontextmanager
async def _resumed(hub: Any, token: str, cursor: str) -> AsyncIterator[EventReader]:
    headers = {**_auth(token), "Accept": "text/event-stream", "Last-Event-ID": cursor}
    async with hub.client.stream("GET", "/v1/me/stream", headers=headers) as response:
        assert response.status_code == 200
        yield EventReader(response)


def _same(replayed: list[Event], live: list[Event]) -> None:
    """Replayed as sent live: the same events, ids and items, in order. An `update`
    carries the state its change left; a `notification` the item as it is now, so only
    its id and `resurfaced` are compared."""
    assert [(e.event, e.id, e.data["id"]) for e in replayed] == [
        (e.event, e.id, e.data["id"]) for e in live
    ]
    for again, sent in zip(replayed, live, strict=True):
        if sent.event == "update":
            assert again.data == sent.data
        else:
            assert again.data["resurfaced"] is sent.data["resurfaced"] is True


async def test_snoozes_resurfaces_and_archives_are_replayed_once_from_any_cursor(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """Snooze, unsnooze, a snooze that resurfaces, bulk archive, archive-all and unarchive
    each stream their events (`update`; `notification` with `resurfaced` for the wake-up),
    and a stream resumed with `Last-Event-ID` from the start or from any event between
    them gets every later one exactly once, in order, then goes on live with no repeat."""
    token = make_token("replays")
    me = _auth(token)
    a, b, c, d = [await _publish(hub, publish_key, ["replays"]) for _ in range(4)]
    inbox = hub.app_state["inbox"]
    async with open_stream(hub.client, token) as stream:
        start = (await stream.next()).id  # the opening `counts`, after the four copies
        snoozed = await hub.client.patch(f"{BASE}/{a}", json={"snooze": 3600}, headers=me)
        assert snoozed.json()["snoozed_until"] is not None
        live = await _changes(stream, 1)
        back = await hub.client.patch(f"{BASE}/{a}", json={"snoozed_until": None}, headers=me)
        assert back.json()["snoozed_until"] is None
        live += await _changes(stream, 1)
        patched = await hub.client.patch(f"{BASE}/{b}", json={"snooze": 3600}, headers=me)
        until = datetime.fromisoformat(patched.json()["snoozed_until"])
        live += await _changes(stream, 1)
        # the wake-up falls due (the delayed worker's call)
        assert await inbox.resurface("default", "replays", b, int(until.timestamp() * 1000))
        live += await _changes(stream, 1)
        bulk = {"ids": [a, b], "archived": True}
        assert (await hub.client.post(f"{BASE}/bulk", json=bulk, headers=me)).json() == {
            "updated": 2
        }
        live += await _changes(stream, 2)
        everything = await hub.client.post(f"{BASE}/archive-all", headers=me)
        assert everything.json() == {"updated": 2}  # c and d: a and b are archived already
        live += await _changes(stream, 2)
        await hub.client.patch(f"{BASE}/{a}", json={"archived": False}, headers=me)
        live += await _changes(stream, 1)
        closing, _ = await stream.until("counts")

    kinds = ["update"] * 3 + ["notification"] + ["update"] * 5
    assert [e.event for e in live] == kinds
    ids = [e.data["id"] for e in live]
    assert ids[:4] == [a, a, b, b] and ids[-1] == a
    assert sorted(ids[4:6]) == sorted([a, b]) and sorted(ids[6:8]) == sorted([c, d])
    assert [e.data["snoozed_until"] is not None for e in live[:3]] == [True, False, True]
    assert (live[3].data["resurfaced"], live[3].data["status"]) == (True, "unread")
    assert [e.data["archived"] for e in live[4:]] == [True, True, True, True, False]
    seqs = [e.seq or 0 for e in live]
    assert seqs == sorted(set(seqs))  # one seq each, rising
    assert closing.id == live[-1].id

    cursors = [start, *(e.id for e in live[:-1])]  # the start, then after each change
    for i, cursor in enumerate(cursors):
        assert cursor is not None
        async with _resumed(hub, token, cursor) as resumed:
            _same(await _replayed_through(resumed, closing.id), live[i:])
            if i in (0, len(cursors) // 2):
                # then live: the next event is the next change (a repeat would precede it)
                await hub.client.patch(f"{BASE}/{c}", json={"archived": False}, headers=me)
                await hub.client.patch(f"{BASE}/{c}", json={"archived": True}, headers=me)
                more = await _changes(resumed, 2)
                assert [(e.event, e.data["id"], e.data["archived"]) for e in more] == [
                    ("update", c, False),
                    ("update", c, True),
                ]
                closing, _ = await resumed.until("counts")
                assert closing.id == more[-1].id
                live += more  # what the later resumes replay too


async def test_a_snooze_hides_it_then_it_resurfaces_unread_live(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """Snoozed: out of the list and the counts, under `status=snoozed`; at its time the
    delayed queue wakes it: unread again, a `notification` event with `resurfaced`."""
    token = make_token("sleepy")
    me = _auth(token)
    kept = await _publish(hub, publish_key, ["sleepy"], title="kept")
    later = await _publish(hub, publish_key, ["sleepy"], title="later")
    await hub.client.patch(f"{BASE}/{later}", json={"read": True}, headers=me)
    async with open_stream(hub.client, token) as stream:
        await stream.next()
        snoozed = await hub.client.patch(f"{BASE}/{later}", json={"snooze": 1}, headers=me)
        assert snoozed.status_code == 200, snoozed.text
        assert snoozed.json()["snoozed_until"] is not None
        update, _ = await stream.until("update")
        assert update.data["id"] == later and update.data["snoozed_until"] is not None
        assert await _ids(hub, me) == [kept]
        assert await _ids(hub, me, "?status=snoozed") == [later]
        assert await _counts(hub, me) == {"unread": 1, "unseen": 1, "total": 1, "views": {}}

        back, _ = await stream.until("notification", timeout=10)
        assert back.data["id"] == later and back.data["resurfaced"] is True
        assert back.data["status"] == "unread" and back.data["snoozed_until"] is None
        counts, _ = await stream.until("counts")
        assert (counts.data["unread"], counts.data["total"]) == (2, 2)
    assert await _ids(hub, me) == [later, kept]
    assert await _ids(hub, me, "?status=snoozed") == []


async def _next_millisecond() -> None:
    """Return in a later millisecond than the call's: a resurfaced copy sorts by the ms
    it came back in, a new one by its id's, and two in one ms tie, ordered by their ids'
    random parts (a clean-clone CI run resurfaced and published in one ms, and the
    order came out the other way)."""
    now_ms = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 <= now_ms:
        await asyncio.sleep(0.0005)


async def _paged(hub: Any, me: dict[str, str], query: str, pages: int = 5) -> list[str]:
    """The ids of up to `pages` pages of the list, following each page's cursor."""
    ids: list[str] = []
    cursor = None
    for _ in range(pages):
        page = (
            await hub.client.get(
                f"{BASE}{query}" + (f"&cursor={cursor}" if cursor else ""), headers=me
            )
        ).json()
        ids += [item["id"] for item in page["items"]]
        if not (cursor := page["next_cursor"]):
            break
    return ids


async def test_a_resurfaced_notification_lists_and_pages_at_the_top(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """Back from a snooze, the oldest notification sorts as if new: first in the list,
    paged by the same cursors, polled again by `since`, read by a read-all before now."""
    me = _auth(make_token("phoenix"))
    oldest, middle, newest = [await _publish(hub, publish_key, ["phoenix"]) for _ in range(3)]
    await _next_millisecond()  # a resurface in `newest`'s ms would tie with it
    before_wake = datetime.now(UTC)
    patched = await hub.client.patch(f"{BASE}/{oldest}", json={"snooze": 3600}, headers=me)
    until = datetime.fromisoformat(patched.json()["snoozed_until"])
    inbox = hub.app_state["inbox"]  # the wake-up falls due (the delayed worker's call)
    assert await inbox.resurface("default", "phoenix", oldest, int(until.timestamp() * 1000))

    assert await _ids(hub, me) == [oldest, newest, middle]
    assert await _paged(hub, me, "?limit=1") == [oldest, newest, middle]
    since = before_wake.isoformat().replace("+00:00", "Z")
    assert await _ids(hub, me, f"?since={since}") == [oldest]  # a poller gets it again
    item = (await hub.client.get(f"{BASE}/{oldest}", headers=me)).json()
    assert (item["status"], item["snoozed_until"]) == ("unread", None)

    # it keeps its place until it leaves: deleted, nothing of it stays in the index
    assert (await hub.client.delete(f"{BASE}/{oldest}", headers=me)).status_code == 204
    assert await _ids(hub, me) == [newest, middle]
    assert await _counts(hub, me) == {"unread": 2, "unseen": 2, "total": 2, "views": {}}


async def test_a_resurfaced_notification_pages_once_oldest_first(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """Oldest first (a poll's order), a copy back from a snooze sits where it came back,
    between older and newer ones, and the cursors page past it once."""
    me = _auth(make_token("phoenix-asc"))
    oldest, middle = [await _publish(hub, publish_key, ["phoenix-asc"]) for _ in range(2)]
    patched = await hub.client.patch(f"{BASE}/{oldest}", json={"snooze": 3600}, headers=me)
    until = datetime.fromisoformat(patched.json()["snoozed_until"])
    inbox = hub.app_state["inbox"]
    assert await inbox.resurface("default", "phoenix-asc", oldest, int(until.timestamp() * 1000))
    await _next_millisecond()  # published in the resurface's ms, the two would tie
    newer = await _publish(hub, publish_key, ["phoenix-asc"])
    assert await _paged(hub, me, "?since=0&limit=1") == [middle, oldest, newer]


async def test_unsnooze_and_a_later_snooze_make_the_old_wake_up_a_no_op(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    me = _auth(make_token("resnooze"))
    nid = await _publish(hub, publish_key, ["resnooze"])
    await hub.client.patch(f"{BASE}/{nid}", json={"snooze": 3600}, headers=me)
    first = (await hub.client.get(f"{BASE}/{nid}", headers=me)).json()["snoozed_until"]
    back = await hub.client.patch(f"{BASE}/{nid}", json={"snoozed_until": None}, headers=me)
    assert back.json()["snoozed_until"] is None
    assert await _ids(hub, me) == [nid]
    # the first wake-up falls due: nothing happens (the copy is not snoozed until then)
    inbox = hub.app_state["inbox"]
    first_ms = int(datetime.fromisoformat(first).timestamp() * 1000)
    await hub.client.patch(f"{BASE}/{nid}", json={"snooze": 7200}, headers=me)
    assert await inbox.resurface("default", "resnooze", nid, first_ms) is False
    assert await _ids(hub, me, "?status=snoozed") == [nid]


async def test_bad_snoozes_are_422_and_change_nothing(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    me = _auth(make_token("badsnooze"))
    nid = await _publish(hub, publish_key, ["badsnooze"])
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    far = (datetime.now(UTC) + timedelta(days=91)).isoformat()
    for body, why in (
        ({"snoozed_until": past}, "in the future"),
        ({"snoozed_until": far}, "90 days"),
        ({"snooze": 0}, "greater than or equal to 1"),
        ({"snooze": 91 * 86400}, "less than or equal"),
        ({"snooze": 60, "snoozed_until": far}, "not both"),
    ):
        refused = await hub.client.patch(f"{BASE}/{nid}", json=body, headers=me)
        assert refused.status_code == 422, body
        assert refused.headers["content-type"] == "application/problem+json"
        assert why in refused.text, (body, refused.text)
    item = (await hub.client.get(f"{BASE}/{nid}", headers=me)).json()
    assert item["snoozed_until"] is None and await _ids(hub, me) == [nid]
    # The epoch is a time in the past like any other, not an unsnooze (only null is).
    snoozed = await hub.client.patch(f"{BASE}/{nid}", json={"snooze": 3600}, headers=me)
    until = snoozed.json()["snoozed_until"]
    for epoch in (0, "0", "1970-01-01T00:00:00Z"):
        refused = await hub.client.patch(f"{BASE}/{nid}", json={"snoozed_until": epoch}, headers=me)
        assert refused.status_code == 422, (epoch, refused.text)
        assert "in the future" in refused.text
    item = (await hub.client.get(f"{BASE}/{nid}", headers=me)).json()
    assert item["snoozed_until"] == until
    theirs = await hub.client.patch(
        f"{BASE}/{nid}", json={"snooze": 60}, headers=_auth(make_token("x"))
    )
    assert theirs.status_code == 404


async def _wake_ups(hub: Any, user: str) -> int:
    """The snooze wake-ups scheduled for `user` (rows of the delayed queue)."""
    async with hub.app_state["sessionmaker"]() as session:
        found = await session.scalar(
            select(func.count()).where(
                DelayedMessage.queue == SNOOZE_QUEUE, DelayedMessage.body["user"].astext == user
            )
        )
    return int(found or 0)


async def test_a_snooze_of_a_notification_the_user_lacks_schedules_no_wake_up(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """A 404 leaves nothing behind: no durable wake-up for a copy that is not there (each
    was a delayed message kept until its time, up to 90 days, one per request)."""
    me = _auth(make_token("nosuchsnooze"))
    nid = await _publish(hub, publish_key, ["someone-else"])
    for body in (
        {"snooze": 3600},
        {"snoozed_until": (datetime.now(UTC) + timedelta(days=1)).isoformat()},
    ):
        missing = await hub.client.patch(f"{BASE}/{nid}", json=body, headers=me)
        assert missing.status_code == 404, missing.text
        gone = await hub.client.patch(f"{BASE}/{'0' * 26}", json=body, headers=me)
        assert gone.status_code == 404, gone.text
    assert await _wake_ups(hub, "nosuchsnooze") == 0
    # a bad time is still a 422 first, whether the copy is there or not
    refused = await hub.client.patch(f"{BASE}/{nid}", json={"snoozed_until": 0}, headers=me)
    assert refused.status_code == 422 and "in the future" in refused.text
    mine = await _publish(hub, publish_key, ["nosuchsnooze"])
    snoozed = await hub.client.patch(f"{BASE}/{mine}", json={"snooze": 3600}, headers=me)
    assert snoozed.status_code == 200, snoozed.text
    assert await _wake_ups(hub, "nosuchsnooze") == 1


async def _wake_up_rows(hub: Any, user: str) -> list[tuple[str, str, int]]:
    """Each snooze wake-up row of `user`: (message id, copy id, until_ms)."""
    async with hub.app_state["sessionmaker"]() as session:
        rows = await session.scalars(
            select(DelayedMessage).where(
                DelayedMessage.queue == SNOOZE_QUEUE, DelayedMessage.body["user"].astext == user
            )
        )
        return sorted((r.id, r.body["id"], r.body["until_ms"]) for r in rows)


async def _queued(hub: Any) -> int:
    """Snooze wake-ups the delayed queue holds in Redis (default tenant), waiting."""
    stats, _ = await hub.app_state["delayed"].queue_stats("default", None, 100, internal=True)
    return sum(s.delayed + s.ready for s in stats if s.queue.name == SNOOZE_QUEUE)


def _ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp() * 1000)


async def test_a_re_snooze_leaves_one_wake_up_the_new_one(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """Snoozed again (another time, or the same), the copy has one wake-up, at its new
    time: the old one's row and its Redis entry go (each stayed until its time, up to 90
    days, a no-op then, and its row for good)."""
    me = _auth(make_token("twice"))
    nid = await _publish(hub, publish_key, ["twice"])
    queued = await _queued(hub)
    await hub.client.patch(f"{BASE}/{nid}", json={"snooze": 3600}, headers=me)
    again = await hub.client.patch(f"{BASE}/{nid}", json={"snooze": 7200}, headers=me)
    until = _ms(again.json()["snoozed_until"])
    rows = await _wake_up_rows(hub, "twice")
    assert [(copy, at) for _id, copy, at in rows] == [(nid, until)]
    assert await _queued(hub) == queued + 1
    same = await hub.client.patch(
        f"{BASE}/{nid}", json={"snoozed_until": again.json()["snoozed_until"]}, headers=me
    )
    assert same.status_code == 200 and _ms(same.json()["snoozed_until"]) == until
    assert [(c, at) for _id, c, at in await _wake_up_rows(hub, "twice")] == [(nid, until)]
    assert await _queued(hub) == queued + 1
    # the one left resurfaces it
    assert await hub.app_state["inbox"].resurface("default", "twice", nid, until) is True


async def test_a_refused_pin_with_a_snooze_leaves_no_wake_up(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """A PATCH pinning past the limit is refused whole: its snooze's wake-up goes with it
    (no row, nothing queued), and a wake-up the copy had stays."""
    me = _auth(make_token("pinsnooze"))
    ids = [await _publish(hub, publish_key, ["pinsnooze"], title=f"n{i}") for i in range(22)]
    for nid in ids[:20]:
        pinned = await hub.client.patch(f"{BASE}/{nid}", json={"pinned": True}, headers=me)
        assert pinned.status_code == 200
    queued = await _queued(hub)
    refused = await hub.client.patch(
        f"{BASE}/{ids[20]}", json={"pinned": True, "snooze": 3600}, headers=me
    )
    assert refused.status_code == 409, refused.text
    assert await _wake_up_rows(hub, "pinsnooze") == [] and await _queued(hub) == queued
    item = (await hub.client.get(f"{BASE}/{ids[20]}", headers=me)).json()
    assert item["snoozed_until"] is None and item["pinned"] is False
    # a snoozed copy refused a pin and a new snooze keeps its snooze and its wake-up
    snoozed = await hub.client.patch(f"{BASE}/{ids[21]}", json={"snooze": 3600}, headers=me)
    until = _ms(snoozed.json()["snoozed_until"])
    refused = await hub.client.patch(
        f"{BASE}/{ids[21]}", json={"pinned": True, "snooze": 7200}, headers=me
    )
    assert refused.status_code == 409
    assert [(c, at) for _id, c, at in await _wake_up_rows(hub, "pinsnooze")] == [(ids[21], until)]
    assert await _queued(hub) == queued + 1


async def test_unsnooze_and_recall_take_the_wake_up_with_them(
    hub: Any, publish_key: str, admin_key: str, make_token: Any
) -> None:
    """A snooze ended early or a snoozed copy recalled: its wake-up goes too. Archiving a
    snoozed copy keeps it (the snooze still ends then, the copy stays archived). A
    deleted copy's stays (a DELETE does not ask PostgreSQL): at its time it does
    nothing."""
    me = _auth(make_token("ends"))
    ids = [await _publish(hub, publish_key, ["ends"], title=f"n{i}") for i in range(5)]
    for nid in ids:
        snoozed = await hub.client.patch(f"{BASE}/{nid}", json={"snooze": 3600}, headers=me)
        assert snoozed.status_code == 200
    queued = await _queued(hub)
    back = await hub.client.patch(f"{BASE}/{ids[0]}", json={"snoozed_until": None}, headers=me)
    assert back.status_code == 200
    assert (await hub.client.delete(f"{BASE}/{ids[1]}", headers=me)).status_code == 204
    bulk = {"ids": [ids[2]], "delete": True}
    assert (await hub.client.post(f"{BASE}/bulk", json=bulk, headers=me)).status_code == 200
    recall = f"/v1/notifications/{ids[3]}"
    assert (await hub.client.delete(recall, headers=_auth(publish_key))).status_code == 204
    archived = await hub.client.patch(f"{BASE}/{ids[4]}", json={"archived": True}, headers=me)
    assert archived.json()["snoozed_until"] is not None
    left = sorted(c for _id, c, _at in await _wake_up_rows(hub, "ends"))
    assert left == sorted([ids[1], ids[2], ids[4]])
    assert await _queued(hub) == queued - 2
    for nid in ids[1:3]:  # the deleted copies' wake-ups act on nothing
        until = next(at for _id, c, at in await _wake_up_rows(hub, "ends") if c == nid)
        assert await hub.app_state["inbox"].resurface("default", "ends", nid, until) is False
