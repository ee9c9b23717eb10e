"""Sharded Pub/Sub on the cluster: one connection per master, SSUBSCRIBEd to the common
channel and the shards of the process's streams; a batch spanning every slot group
reaches every stream."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from integration.test_announce import waiting_at
from integration.test_stream import no_streams_left, open_stream, send
from notifyhub.realtime import shards
from support.cluster import LocalCluster


async def _shard_subscribers(local_cluster: LocalCluster, channel: str) -> int:
    """SSUBSCRIBEd connections to `channel`, as its master counts them."""
    node = local_cluster.master_of(channel)
    client = Redis(host="127.0.0.1", port=node.port)
    try:
        [(_, count)] = await client.execute_command("PUBSUB SHARDNUMSUB", channel)
        return int(count)
    finally:
        await client.aclose()


async def test_one_connection_per_master_subscribed_to_its_streams_shards(
    hub: Any, local_cluster: LocalCluster, make_token: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(shards, "IDLE_S", 0.0)  # unsubscribed as soon as the listener wakes
    listener = hub.app_state["hub"]
    doorbells = listener._doorbells
    owners = {n.port for n in local_cluster.masters_of([doorbells.common, *doorbells.channels])}
    for node in local_cluster.live_nodes():
        client = Redis(host="127.0.0.1", port=node.port)
        try:
            clients = await client.client_list()
            names = [c["name"] for c in clients if c["name"] == listener.client_name]
            assert len(names) == (1 if node.port in owners else 0)
        finally:
            await client.aclose()
    channel = doorbells.channel_of("default/sharded-sub")
    assert await _shard_subscribers(local_cluster, doorbells.common) == 1
    assert await _shard_subscribers(local_cluster, channel) == 0
    async with open_stream(hub, make_token("sharded-sub")) as stream:
        assert (await stream.next()).event == "counts"
        assert await _shard_subscribers(local_cluster, channel) == 1
    async with asyncio.timeout(5):  # the listener unsubscribes within a poll (1 s)
        while await _shard_subscribers(local_cluster, channel):
            await asyncio.sleep(0.05)
    assert listener.healthy  # its own SUNSUBSCRIBE is not a moved slot


async def test_a_fan_out_over_many_slots_reaches_every_stream(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    watched = [f"spread-{i}" for i in range(8)]
    everyone = watched + [f"bulk-{i}" for i in range(300)]
    async with asyncio.TaskGroup() as group:
        streams = [open_stream(hub, make_token(user)) for user in watched]
        readers = [await group.create_task(s.__aenter__()) for s in streams]
    try:
        for reader in readers:
            assert (await reader.next()).event == "counts"
        sent = await send(hub, publish_key, everyone)
        for reader in readers:
            event, _ = await reader.until("notification")
            assert event.data["id"] == sent
    finally:
        for stream in streams:
            await stream.__aexit__(None, None, None)
    await no_streams_left(hub)
    inbox = await hub.client.get(
        "/v1/me/notifications", headers={"Authorization": f"Bearer {make_token('bulk-299')}"}
    )
    assert [item["id"] for item in inbox.json()["items"]] == [sent]


def _move_slot(cluster: LocalCluster, slot: int, source: Any, target: Any) -> None:
    """Redis' own resharding steps: IMPORTING/MIGRATING, MIGRATE whatever keys earlier
    tests left in the slot, then CLUSTER SETSLOT ... NODE on every master."""
    target_id = cluster.node_id(target)
    with contextlib.closing(target.client()) as client:
        client.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", cluster.node_id(source))
    with contextlib.closing(source.client()) as client:
        client.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
        while keys := client.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
            client.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
    for node in [target, source, *cluster.nodes[:3]]:
        with contextlib.closing(node.client()) as client:
            client.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)


async def test_a_moved_shard_channel_is_resubscribed(
    hub: Any, publish_key: str, make_token: Any, local_cluster: LocalCluster
) -> None:
    """Redis tells subscribers of a moved slot with SUNSUBSCRIBE; the hub subscribes
    again on the new owner and streams keep getting their events."""
    doorbells = hub.app_state["hub"]._doorbells
    user = "mv-7"
    channel = doorbells.channel_of(f"default/{user}")
    slot = key_slot(channel.encode())
    source = local_cluster.master_of(channel)
    target = next(n for n in local_cluster.nodes[:3] if n is not source)
    with contextlib.closing(source.client()) as client:
        client.set(channel, "a key in the moving slot")  # as earlier tests may leave
    reconnects = hub.app_state["metrics"].pubsub_reconnects_total._value.get()
    async with open_stream(hub, make_token(user)) as events:
        assert (await events.next()).event == "counts"
        await asyncio.to_thread(_move_slot, local_cluster, slot, source, target)
        async with asyncio.timeout(10):
            while hub.app_state["metrics"].pubsub_reconnects_total._value.get() == reconnects:
                await asyncio.sleep(0.05)
            while not hub.app_state["hub"].healthy:
                await asyncio.sleep(0.05)
        sent = await send(hub, publish_key, [user])
        event, _ = await events.until("notification", timeout=10)
        assert event.data["id"] == sent
    assert local_cluster.master_of(channel) is target
    with contextlib.closing(target.client()) as client:
        assert client.getdel(channel) == "a key in the moving slot"
    await no_streams_left(hub)


@pytest.mark.parametrize("bulk", [10, 200])
async def test_a_broadcast_is_announced_on_every_shard(
    settings: Any, start_hub: Any, publish_key: str, make_token: Any, bulk: int
) -> None:
    """On a Cluster the writer publishes the announcement's lines after the slot groups
    answer them: to each user's shard channel (16 users), or all on the common channel
    (206, past SHARED_AT). Streams in several slots show the broadcast before its copies
    (their ids name it), then get the copies' counts without a second notification."""
    limits = settings.limits.model_copy(update={"announce_at": 2})
    async with start_hub(settings.model_copy(update={"limits": limits})) as hub:
        watched = [f"ann-spread-{i}" for i in range(6)]
        everyone = watched + [f"ann-bulk-{bulk}-{i}" for i in range(bulk)]
        async with contextlib.AsyncExitStack() as stack:
            readers = [
                await stack.enter_async_context(open_stream(hub, make_token(user)))
                for user in watched
            ]
            for reader in readers:
                assert (await reader.next()).event == "counts"
            for user in watched:
                await waiting_at(hub, user, 0)
            sent = await send(hub, publish_key, everyone)
            for reader in readers:
                shown, counts = await reader.take(2)
                assert shown.event == "notification" and shown.id == f"0.{sent}"
                assert counts.event == "counts" and counts.seq == 1 and counts.ahead == []
    slots = {key_slot(f"default/{user}".encode()) for user in watched}
    assert len(slots) > 1
