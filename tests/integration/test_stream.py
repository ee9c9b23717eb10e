"""The live stream: events, resume by Last-Event-ID, reset, caps, tokens, forgery."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from notifyhub.settings import Settings
from support.sse import EventReader
from support.tls import TEST_TLS


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextlib.asynccontextmanager
async def open_stream(hub: Any, token: str, **headers: str) -> AsyncIterator[EventReader]:
    url = f"{hub.base_url}/v1/me/stream"
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(10.0), verify=TEST_TLS) as client,
        client.stream("GET", url, headers={**_auth(token), **headers}) as response,
    ):
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield EventReader(response)


async def no_streams_left(hub: Any) -> None:
    """The server notices a closed stream asynchronously: allow it a moment."""
    async with asyncio.timeout(5):
        while hub.app_state["hub"].stream_count:
            await asyncio.sleep(0.02)


async def send(hub: Any, key: str, users: list[str], **fields: Any) -> str:
    body = {"recipients": {"users": users}, "title": fields.pop("title", "hello"), **fields}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def test_live_notification_update_delete(hub: Any, publish_key: str, make_token: Any) -> None:
    token = make_token("sam")
    async with open_stream(hub, token) as stream:
        first = await stream.next()
        assert first.event == "counts" and first.data["total"] == 0
        assert stream.retry is not None
        sent = await send(hub, publish_key, ["sam"], title="live one")
        event, _ = await stream.until("notification")
        assert event.data["id"] == sent and event.data["title"] == "live one"
        counts = await stream.next()
        assert counts.event == "counts" and counts.data["unread"] == 1 and counts.id == event.id
        await hub.client.patch(
            f"/v1/me/notifications/{sent}", json={"read": True}, headers=_auth(token)
        )
        update, _ = await stream.until("update")
        assert update.data == {
            "id": sent,
            "status": "read",
            "seen": True,
            "read_at": update.data["read_at"],
            "archived": False,
            "pinned": False,
            "snoozed_until": None,
        }
        await hub.client.delete(f"/v1/me/notifications/{sent}", headers=_auth(token))
        delete, _ = await stream.until("delete")
        assert delete.data == {"id": sent} and (delete.seq or 0) > (update.seq or 0)
    await no_streams_left(hub)


async def test_resume_gets_exactly_the_missed_events(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    token = make_token("tess")
    async with open_stream(hub, token) as stream:
        await send(hub, publish_key, ["tess"], title="before")
        seen, _ = await stream.until("notification")
        last = (await stream.next()).id
    missed = [await send(hub, publish_key, ["tess"], title=f"missed {i}") for i in range(3)]
    async with open_stream(hub, token, **{"Last-Event-ID": str(last)}) as stream:
        replayed = [e for e in await stream.take(4) if e.event == "notification"]
        assert [e.data["id"] for e in replayed] == missed
        live = await send(hub, publish_key, ["tess"], title="live")
        event, before = await stream.until("notification")
        assert event.data["id"] == live and all(e.event == "counts" for e in before)
    assert seen.data["title"] == "before"


async def test_a_replacement_gone_by_the_resume_still_ends_the_copy_it_replaced(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """X is shown; while the stream is away Y replaces X (same collapse key), then Z
    replaces Y, or the user deletes Y. Y's change has no item left to send; it sends a
    `delete` of X, which no later change names (Z's names Y): else the client kept X for
    good, its list one more than its counts."""
    for variant, user in (("replaced again", "coll-again"), ("deleted", "coll-deleted")):
        token = make_token(user)
        async with open_stream(hub, token) as stream:
            x = await send(hub, publish_key, [user], collapse_key="cart")
            await stream.until("notification")
            last = (await stream.next()).id
        y = await send(hub, publish_key, [user], collapse_key="cart")
        if variant == "deleted":
            await hub.client.delete(f"/v1/me/notifications/{y}", headers=_auth(token))
        else:
            z = await send(hub, publish_key, [user], collapse_key="cart")
        async with open_stream(hub, token, **{"Last-Event-ID": str(last)}) as stream:
            events = []
            while len(events) < 2:  # (counts events come between, merged or not)
                if (event := await stream.next()).event != "counts":
                    events.append(event)
        shown = {x}  # what a client keeps from the events
        for event in events:
            if event.event == "delete":
                shown.discard(event.data["id"])
            else:
                shown.discard(event.data.get("replaces"))
                shown.add(event.data["id"])
        listed = (await hub.client.get("/v1/me/notifications", headers=_auth(token))).json()
        assert shown == {i["id"] for i in listed["items"]}, (variant, events)
        if variant == "deleted":
            assert [(e.event, e.data) for e in events] == [
                ("delete", {"id": x}),
                ("delete", {"id": y}),
            ]
        else:
            assert [(e.event, e.data["id"]) for e in events] == [("delete", x), ("notification", z)]
            assert events[1].data["replaces"] == y


async def test_gap_older_than_log_gets_reset(
    start_hub: Any, publish_key: str, make_token: Any, settings: Settings
) -> None:
    # A short log (the smallest allowed), so a few rounds push its first entries out.
    limits = settings.limits.model_copy(update={"change_log_max": 10})
    async with start_hub(settings.model_copy(update={"limits": limits})) as hub:
        await _gap_older_than_log_gets_reset(hub, publish_key, make_token("uma"), 10)


async def _gap_older_than_log_gets_reset(hub: Any, key: str, token: str, log_max: int) -> None:
    for i in range(3):
        await send(hub, key, ["uma"], title=f"n{i}")
    # Marking all three read/unread repeatedly pushes the first entries out of the log.
    page = (await hub.client.get("/v1/me/notifications", headers=_auth(token))).json()
    ids = [item["id"] for item in page["items"]]
    rounds = log_max // 3 + 1
    for i in range(rounds):
        body = {"ids": ids, "read": i % 2 == 0}
        await hub.client.post("/v1/me/notifications/bulk", json=body, headers=_auth(token))
    async with open_stream(hub, token, **{"Last-Event-ID": "1"}) as stream:
        event = await stream.next()
        assert event.event == "reset"
        assert event.data["total"] == 3 and event.data["seq"] == 3 + 3 * rounds


async def test_unknown_last_event_id_gets_reset(hub: Any, make_token: Any) -> None:
    resets = hub.app_state["metrics"].stream_events_sent_total.labels(type="reset")
    before = resets._value.get()
    async with open_stream(hub, make_token("vera"), **{"Last-Event-ID": "99999"}) as stream:
        assert (await stream.next()).event == "reset"
    assert resets._value.get() == before + 1


async def test_payload_cannot_forge_events(hub: Any, publish_key: str, make_token: Any) -> None:
    token = make_token("walt")
    async with open_stream(hub, token) as stream:
        await stream.next()
        evil = "x\n\ndata: {}\nevent: delete\r\rid: 999\n\n"
        await send(hub, publish_key, ["walt"], title="evil", body=evil, data={"k": evil})
        event = await stream.next()
        assert event.event == "notification" and event.data["body"] == evil
        assert (await stream.next()).event == "counts"


async def test_stream_token_only_opens_streams(hub: Any, make_token: Any) -> None:
    user_token = make_token("xena")
    minted = await hub.client.post("/v1/me/stream-tokens", headers=_auth(user_token))
    assert minted.status_code == 200
    stream_token = minted.json()["token"]
    assert minted.json()["expires_at"].endswith("Z")
    rest = await hub.client.get("/v1/me/notifications", headers=_auth(stream_token))
    assert rest.status_code == 401
    url = f"{hub.base_url}/v1/me/stream?access_token={stream_token}"
    async with httpx.AsyncClient() as client, client.stream("GET", url) as response:
        assert response.status_code == 200
        event = await EventReader(response).next()
        assert event.event == "counts"
    bad = await hub.client.get(f"/v1/me/stream?access_token={user_token}")
    assert bad.status_code == 401


async def test_per_user_stream_cap(hub: Any, make_token: Any, settings: Any) -> None:
    token = make_token("yuri")
    cap = settings.limits.streams_per_user
    async with contextlib.AsyncExitStack() as stack:
        readers = [await stack.enter_async_context(open_stream(hub, token)) for _ in range(cap)]
        for reader in readers:  # (kept referenced: a collected reader closes its stream)
            await reader.next()
        over = await hub.client.get("/v1/me/stream", headers=_auth(token))
        assert over.status_code == 429
        assert over.headers["content-type"].startswith("application/problem+json")
        # as a dropped stream's reconnect (its `retry:`), in whole seconds
        retry_s = max(1, math.ceil(settings.stream.retry_ms / 1000))
        assert over.headers["retry-after"] == str(retry_s)
    await no_streams_left(hub)


async def test_the_server_alone_says_connection(hub: Any, make_token: Any) -> None:
    """`Connection` is hop-by-hop: the stream sends none of its own, so a client that asks
    to close gets `close` alone (once also `keep-alive`), and HTTP/1.1 none at all."""
    token = make_token("yves")
    async with open_stream(hub, token, Connection="close") as stream:
        assert stream.response.headers.get_list("connection") == ["close"]
        assert (await stream.next()).event == "counts"
    async with open_stream(hub, token) as stream:
        assert stream.response.headers.get_list("connection") == []
        assert (await stream.next()).event == "counts"
    await no_streams_left(hub)


@pytest.mark.parametrize("user", ["zoe"])
async def test_stream_requires_credentials(hub: Any, user: str) -> None:
    assert (await hub.client.get("/v1/me/stream")).status_code == 401
    assert (await hub.client.get("/v1/me/stream?access_token=garbage")).status_code == 401


async def test_stream_errors_are_problems(hub: Any, make_token: Any) -> None:
    """The stream fast path keeps the contract: problem+json, the route in metrics."""
    auth = {"Authorization": f"Bearer {make_token('yael')}"}
    too_long = await hub.client.get("/v1/me/stream", headers={**auth, "Last-Event-ID": "1" * 33})
    assert too_long.status_code == 422
    assert too_long.headers["content-type"] == "application/problem+json"
    assert "Last-Event-ID" in too_long.json()["detail"]
    unauthorized = await hub.client.get("/v1/me/stream?access_token=garbage")
    assert unauthorized.headers["content-type"] == "application/problem+json"
    metrics = (await hub.client.get("/metrics")).text
    assert 'route="/v1/me/stream",status="401"' in metrics


async def test_an_idle_stream_pings_without_reading(hub: Any, make_token: Any) -> None:
    """Pings keep an idle stream open without a Redis read each: only a ring re-reads."""
    state = hub.app_state
    state["settings"].stream.ping_s = 0.05
    reader = state["reader"]
    reads: list[str] = []
    original = reader.changes

    async def counted(tenant: str, user: str, after: int, most: int) -> Any:
        reads.append(user)
        return await original(tenant, user, after, most)

    reader.changes = counted
    async with open_stream(hub, make_token("idle")) as stream:
        await stream.next()  # the opening counts
        with pytest.raises(TimeoutError):  # the clock's tick in flight may last 1 s
            await stream.next(timeout=1.6)  # nothing but pings
        assert stream.comments >= 5
    assert reads.count("idle") == 1  # the catch-up on open, none per ping


async def test_a_resumed_stream_opens_with_one_read(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """Resuming reads the changes after the cursor once, before the 200, and no position
    besides (a reconnect storm is made of these opens)."""
    token = make_token("rhea")
    async with open_stream(hub, token) as stream:
        opened = await stream.next()
    sent = await send(hub, publish_key, ["rhea"], title="missed")
    store, reader = hub.app_state["store"], hub.app_state["reader"]
    positions: list[Any] = []
    reads: list[Any] = []
    position, changes = store.position, reader.changes

    async def counted_position(*args: Any) -> Any:
        positions.append(args)
        return await position(*args)

    async def counted_changes(*args: Any) -> Any:
        reads.append(args)
        return await changes(*args)

    store.position, reader.changes = counted_position, counted_changes
    try:
        assert opened.id is not None
        async with open_stream(hub, token, **{"Last-Event-ID": opened.id}) as stream:
            event, _ = await stream.until("notification")
            assert event.data["id"] == sent
            counts = await stream.next()
            assert counts.event == "counts" and counts.data["unread"] == 1
    finally:
        del store.position, reader.changes
    assert positions == []
    assert [args[2] for args in reads] == [opened.seq]


async def test_shutdown_ends_streams_cleanly(hub: Any, make_token: Any) -> None:
    async with open_stream(hub, make_token("zed")) as stream:
        await stream.next()
        hub.server.stop()
        with pytest.raises(EOFError):
            await stream.next(timeout=5)


async def test_an_open_stream_is_counted_when_it_starts(hub: Any, make_token: Any) -> None:
    """Streams count themselves at their 200 (their request lasts as long as they do)."""
    async with open_stream(hub, make_token("counted")) as stream:
        await stream.next()
        metrics = (await hub.client.get("/metrics")).text
        assert (
            'notifyhub_http_requests_total{method="GET",route="/v1/me/stream",status="200"} 1.0'
            in metrics
        )
