"""Doorbell fan-in (issue 38): a hub hears only the shard channels of its streams' users
(and the common one), subscribes to a shard while it holds a stream of it, and a new
stream's first read comes after its shard's subscription; `/metrics` counts what it
heard and the share for its own streams (docs/scaling.md "Doorbell fan-in")."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from redis.asyncio import Redis

from integration.test_stream import no_streams_left, open_stream, send
from notifyhub.metrics import Metrics
from notifyhub.realtime import hub as hub_module
from notifyhub.realtime import shards
from notifyhub.realtime.hub import Hub
from notifyhub.settings import Settings
from notifyhub.store.doorbells import Doorbells
from notifyhub.store.keys import Keys

LOCAL_LINES, OTHER_LINES = 'lines_total{local="true"}', 'lines_total{local="false"}'
OTHER_BYTES = 'bytes_total{local="false"}'


async def _doorbells(hub: Any) -> dict[str, float]:
    """This hub's doorbell counters, from its `/metrics`."""
    text = (await hub.client.get("/metrics")).text
    counted = {}
    for line in text.splitlines():
        if line.startswith("notifyhub_doorbell_"):
            name, value = line.rsplit(" ", 1)
            counted[name.removeprefix("notifyhub_doorbell_")] = float(value)
    return counted


async def _subscribers(redis: Redis, channel: str) -> int:
    [(_, count)] = await redis.pubsub_numsub(channel)
    return int(count)


def _channel(settings: Settings, member: str) -> str:
    keys = Keys(settings.redis_prefix, pubsub_shards=settings.redis_pubsub_shards)
    return Doorbells(keys, sharded=False).channel_of(member)


async def test_a_hub_hears_only_the_shards_of_its_streams(
    settings: Settings, start_hub: Any, publish_key: str, make_token: Any
) -> None:
    """Two hubs, a stream each, their users in two shards: each hub counts its own user's
    doorbells as local and never receives the other's (not even as others' lines)."""
    mine, theirs = "default/fanin-first", "default/fanin-second"
    assert _channel(settings, mine) != _channel(settings, theirs)
    async with (
        start_hub(settings) as first,
        start_hub(settings) as second,
        open_stream(first, make_token("fanin-first")) as stream,
        open_stream(second, make_token("fanin-second")) as elsewhere,
    ):
        assert (await stream.next()).event == "counts"
        assert (await elsewhere.next()).event == "counts"
        before = await _doorbells(second)
        for n in range(3):
            await send(first, publish_key, ["fanin-first"], title=f"for the first {n}")
            await stream.until("notification")
        # The second hub's own doorbell comes after the three on its one connection: had
        # it been subscribed to the first's shard, those would have been counted by now.
        await send(first, publish_key, ["fanin-second"], title="for the second")
        await elsewhere.until("notification")
        heard, seen = await _doorbells(first), await _doorbells(second)
    assert heard[LOCAL_LINES] >= 3 and heard.get(OTHER_LINES, 0.0) == 0.0
    assert seen[LOCAL_LINES] == before.get(LOCAL_LINES, 0.0) + 1
    assert seen.get(OTHER_LINES, 0.0) == before.get(OTHER_LINES, 0.0) == 0.0
    assert seen.get(OTHER_BYTES, 0.0) == 0.0


async def test_the_shard_subscription_follows_the_streams(
    hub: Any,
    redis: Redis,
    settings: Settings,
    publish_key: str,
    make_token: Any,
    monkeypatch: Any,
) -> None:
    """Subscribed from a shard's first stream to its last (plus `IDLE_S`, 0 here);
    subscribed again for a stream opened after, which gets its events."""
    monkeypatch.setattr(shards, "IDLE_S", 0.0)
    channel = _channel(settings, "default/follows")
    assert await _subscribers(redis, channel) == 0
    async with open_stream(hub, make_token("follows")) as one:
        assert (await one.next()).event == "counts"
        assert await _subscribers(redis, channel) == 1
        async with open_stream(hub, make_token("follows")) as two:
            assert (await two.next()).event == "counts"
            assert await _subscribers(redis, channel) == 1
        await send(hub, publish_key, ["follows"], title="one left")
        await one.until("notification")
        assert await _subscribers(redis, channel) == 1
    await no_streams_left(hub)
    async with asyncio.timeout(5):  # the listener unsubscribes within a poll (1 s)
        while await _subscribers(redis, channel):
            await asyncio.sleep(0.05)
    assert hub.app_state["hub"].shards.subscribed == {f"{settings.redis_prefix}events"}
    async with open_stream(hub, make_token("follows")) as again:
        assert (await again.next()).event == "counts"
        assert await _subscribers(redis, channel) == 1
        sent = await send(hub, publish_key, ["follows"], title="back")
        event, _ = await again.until("notification")
        assert event.data["id"] == sent


async def test_a_doorbell_rung_right_after_the_subscription_is_heard(
    settings: Settings, redis: Redis
) -> None:
    """`subscribe_for` returns once Redis confirmed the subscription, so a doorbell rung
    the moment it returns (before a stream's first read could finish) reaches the stream;
    a stream whose shard was not subscribed would miss it: a user in another shard,
    attached without waiting, is not rung by the doorbell published to it at once."""
    assert settings.redis_url is not None
    keys = Keys(settings.redis_prefix, pubsub_shards=settings.redis_pubsub_shards)
    hub = Hub(settings.redis_url, Doorbells(keys, sharded=False), Metrics(), streams_per_user=2)
    await hub.start()
    try:
        assert hub.healthy
        waited, hasty = hub.attach("t", "race-waited"), hub.attach("t", "race-hasty")
        channel, other = (
            hub.shards.channel_of("t/race-waited"),
            hub.shards.channel_of("t/race-hasty"),
        )
        assert channel != other
        await hub.subscribe_for(waited)
        await redis.publish(other, b"t/race-hasty 5")  # its SUBSCRIBE not even sent yet
        await redis.publish(channel, b"t/race-waited 7")
        async with asyncio.timeout(5):
            await waited.wait()
        assert waited.latest == 7
        assert hasty.latest == 0  # its doorbell came before this one, or never
        await hub.subscribe_for(hasty)
        await redis.publish(other, b"t/race-hasty 6")
        async with asyncio.timeout(5):
            await hasty.wait()
        assert hasty.latest == 6
    finally:
        await hub.stop()


async def test_a_publish_to_users_of_many_shards_reaches_each_stream(
    hub: Any, redis: Redis, settings: Settings, publish_key: str, make_token: Any
) -> None:
    """Fewer than SHARED_AT users: place.lua rings one message per shard, each with the
    notification (its streams send it without reading the log)."""
    users = [f"many-shards-{i}" for i in range(6)]
    assert len({_channel(settings, f"default/{u}") for u in users}) == len(users)
    async with contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(open_stream(hub, make_token(u))) for u in users]
        for stream in streams:
            assert (await stream.next()).event == "counts"
        sent = await send(hub, publish_key, users, title="to six shards")
        for stream in streams:
            event, _ = await stream.until("notification")
            assert event.data["id"] == sent


async def test_a_stream_that_stopped_waiting_is_rung_once_subscribed(
    settings: Settings, redis: Redis, monkeypatch: Any
) -> None:
    """A stream that gave up waiting for its shard's subscription (Redis slow to confirm)
    read before it: the confirmation rings it, so it reads again and misses nothing."""
    assert settings.redis_url is not None
    keys = Keys(settings.redis_prefix, pubsub_shards=settings.redis_pubsub_shards)
    hub = Hub(settings.redis_url, Doorbells(keys, sharded=False), Metrics(), streams_per_user=2)
    await hub.start()
    try:
        sub = hub.attach("t", "gave-up")
        monkeypatch.setattr(shards, "CONFIRM_TIMEOUT_S", 0.0)
        await hub.subscribe_for(sub)  # returns before the confirmation
        async with asyncio.timeout(5):
            assert await sub.wait()  # rung by the confirmation
        assert await _subscribers(redis, hub.shards.channel_of("t/gave-up")) == 1
    finally:
        await hub.stop()


async def test_a_shard_stays_subscribed_a_while_after_its_last_stream(
    hub: Any, redis: Redis, settings: Settings, make_token: Any
) -> None:
    """A stream that reconnects at once (a reconnect storm) finds its shard subscribed:
    no SUBSCRIBE round trip before its first read."""
    channel = _channel(settings, "default/comes-back")
    async with open_stream(hub, make_token("comes-back")) as stream:
        assert (await stream.next()).event == "counts"
    await no_streams_left(hub)
    await hub.app_state["hub"].shards.unsubscribe_idle()  # as the listener does when it wakes
    assert await _subscribers(redis, channel) == 1
    assert channel in hub.app_state["hub"].shards.subscribed


async def test_a_read_of_many_doorbells_lets_others_run_between_them(
    settings: Settings, monkeypatch: Any
) -> None:
    """One read can hold a fan-out's many messages: the hub dispatches them in order and
    hands the loop back once its slice is used up (here at once: after each one), so
    other streams and requests are not held for the whole read."""
    assert settings.redis_url is not None
    keys = Keys(settings.redis_prefix, pubsub_shards=settings.redis_pubsub_shards)
    hub = Hub(settings.redis_url, Doorbells(keys, sharded=False), Metrics(), streams_per_user=2)
    sub = hub.attach("t", "sliced")
    order: list[str] = []
    dispatch = hub.dispatch

    def recorded(payload: bytes) -> None:
        dispatch(payload)
        order.append(f"seq {sub.latest}")

    async def other_work() -> None:
        while True:
            order.append("other")
            await asyncio.sleep(0)

    monkeypatch.setattr(hub, "dispatch", recorded)
    monkeypatch.setattr(hub_module, "DISPATCH_SLICE_S", 0.0)
    common = keys.channel.encode()
    replies = [[b"message", common, f"t/sliced {seq}".encode()] for seq in (1, 2, 3)]
    other = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    try:
        await hub._on_replies(replies)
    finally:
        other.cancel()
    dispatched = [entry for entry in order if entry != "other"]
    assert dispatched == ["seq 1", "seq 2", "seq 3"]
    between = order[order.index("seq 1") : order.index("seq 3")]
    assert between.count("other") >= 2  # after seq 1 and after seq 2
