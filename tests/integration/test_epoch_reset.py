"""Redis loses a user's data: open streams get one `reset` and go on live, and a client
resuming with an id of the lost epoch gets a `reset` (the seq alone could not tell, once
the new seq passed the old cursor). The loss is this test's key prefix deleted, never a
FLUSHALL of the shared Redis; the epoch watch runs only when a test steps it."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from integration.test_epoch_watch import _drop_prefix
from integration.test_stream import no_streams_left, open_stream, send
from notifyhub.settings import Settings
from support.sse import Event, EventReader


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The watch ticks once at start-up, then only when stepped (`_watch`)."""
    workers = settings.workers.model_copy(update={"epoch_check_interval_s": 3600.0})
    return settings.model_copy(update={"workers": workers})


async def _watch(hub: Any) -> bool:
    return bool(await hub.app_state["runner"].loop("epoch-watch").step())


def _value(hub: Any, name: str, **labels: str) -> float:
    found = hub.app_state["metrics"].registry.get_sample_value(name, labels)
    return float(found or 0.0)


async def _listed(hub: Any, token: str) -> set[str]:
    headers = {"Authorization": f"Bearer {token}"}
    page = await hub.client.get("/v1/me/notifications", params={"limit": 100}, headers=headers)
    return {item["id"] for item in page.json()["items"]}


async def _until_id(stream: EventReader, item_id: str) -> list[Event]:
    """Events up to and including the notification `item_id`."""
    seen: list[Event] = []
    while not (seen and seen[-1].event == "notification" and seen[-1].data["id"] == item_id):
        seen.append(await stream.next())
    return seen


async def _opened_at(hub: Any, key: str, user: str, stream: EventReader, n: int) -> Event:
    """Send `n` notifications and read them; the counts event after the last."""
    assert (await stream.next()).event == "counts"
    for i in range(n):
        await _until_id(stream, await send(hub, key, [user], title=f"before {i}"))
    counts = await stream.next()
    assert counts.event == "counts" and counts.seq == n and counts.epoch
    return counts


async def test_a_loss_then_more_changes_than_the_cursor_resets_the_stream(
    hub: Any,
    settings: Settings,
    redis: Redis,
    publish_key: str,
    make_token: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The new seq passes the cursor before the stream reads (its doorbells lost, as in a
    Pub/Sub gap): the seqs alone look like a stream two changes behind."""
    token = make_token("epoch-more")
    doorbells = hub.app_state["hub"]
    async with open_stream(hub, token) as stream:
        before = await _opened_at(hub, publish_key, "epoch-more", stream, 2)
        assert await _drop_prefix(redis, settings.redis_prefix) > 0
        monkeypatch.setattr(doorbells, "dispatch", lambda *heard: None)
        after = [await send(hub, publish_key, ["epoch-more"], title=f"after {i}") for i in range(4)]
        monkeypatch.undo()
        doorbells.resync_all()  # what the hub does after a Pub/Sub gap
        reset, skipped = await stream.until("reset")
        assert not skipped  # nothing of the new data was sent as if it followed the cursor
        assert reset.epoch != before.epoch and reset.data["seq"] == 4
        assert await _listed(hub, token) == set(after)  # what a client reloads on `reset`
        assert await _watch(hub)  # the watch sees the loss too: streams re-check, no 2nd reset
        last = await send(hub, publish_key, ["epoch-more"], title="last")
        tail = await _until_id(stream, last)
        assert [e.event for e in tail] == ["notification"]
        assert tail[-1].epoch == reset.epoch
    assert _value(hub, "notifyhub_streams_reset_total", reason="epoch") == 1
    assert _value(hub, "notifyhub_redis_data_loss_total", sign="marker_missing") == 1
    assert _value(hub, "notifyhub_redis_rebuilds_total", outcome="ok") == 1
    await no_streams_left(hub)


async def test_a_loss_with_no_new_change_resets_when_the_watch_sees_it(
    hub: Any, settings: Settings, redis: Redis, publish_key: str, make_token: Any
) -> None:
    async with open_stream(hub, make_token("epoch-quiet")) as stream:
        await _opened_at(hub, publish_key, "epoch-quiet", stream, 3)
        assert await _drop_prefix(redis, settings.redis_prefix) > 0
        assert await _watch(hub)
        reset = await stream.next()
        assert reset.event == "reset" and reset.data == {
            "unread": 0, "unseen": 0, "total": 0, "seq": 0
        }  # fmt: skip
        after = await send(hub, publish_key, ["epoch-quiet"], title="after")
        events = await _until_id(stream, after)  # the new epoch's first change, live
        assert [e.event for e in events] == ["notification"] and events[0].seq == 1
        assert not await _watch(hub)  # marker rebuilt: no loss any more
    assert _value(hub, "notifyhub_streams_reset_total", reason="epoch") == 1


async def test_a_reconnect_with_an_id_of_the_lost_epoch_gets_a_reset(
    hub: Any, settings: Settings, redis: Redis, publish_key: str, make_token: Any
) -> None:
    token = make_token("epoch-back")
    async with open_stream(hub, token) as stream:
        old = await _opened_at(hub, publish_key, "epoch-back", stream, 3)
    assert await _drop_prefix(redis, settings.redis_prefix) > 0
    for i in range(5):  # more than the old cursor: seq 5 of the new epoch
        await send(hub, publish_key, ["epoch-back"], title=f"after {i}")
    assert old.id is not None and old.seq is not None
    for last_id in (old.id, str(old.seq)):  # a bare seq (from before epochs) is not trusted
        async with open_stream(hub, token, **{"Last-Event-ID": last_id}) as stream:
            reset = await stream.next()
            assert reset.event == "reset" and reset.data["seq"] == 5
            assert reset.epoch != old.epoch
    assert reset.id is not None
    async with open_stream(hub, token, **{"Last-Event-ID": reset.id}) as stream:  # resumes
        live = await send(hub, publish_key, ["epoch-back"], title="live")
        assert [e.event for e in await _until_id(stream, live)] == ["notification"]
    await no_streams_left(hub)


async def test_readyz_is_unready_from_a_loss_until_the_rebuild_finished(
    hub: Any, settings: Settings, redis: Redis
) -> None:
    """Between the loss and the rebuild, lists may lack what is not replayed yet: a load
    balancer (and the fault suite) hears it from /readyz, not from a short list."""
    assert (await hub.client.get("/readyz")).status_code == 200
    assert await _drop_prefix(redis, settings.redis_prefix) > 0
    lost = await hub.client.get("/readyz")
    assert lost.status_code == 503
    assert lost.json()["checks"] == {
        "redis": True,
        "redis_data": False,
        "postgres": True,
        "pubsub": True,
        "loops": True,
    }
    assert await _watch(hub)  # the rebuild sets the epoch marker again
    rebuilt = await hub.client.get("/readyz")
    assert rebuilt.status_code == 200 and rebuilt.json()["checks"]["redis_data"] is True
