"""Sharded Pub/Sub on the cluster: one subscription per shard master, a batch spanning
every slot group reaches every stream."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from integration.test_stream import no_streams_left, open_stream, send
from notifyhub.embedded_cluster import LocalCluster


async def test_one_sharded_subscription_per_master_per_process(
    hub: Any, redis: Redis, local_cluster: LocalCluster
) -> None:
    doorbells = hub.app.state.hub._doorbells
    owners = {local_cluster.master_of(channel).port for channel in doorbells.channels}
    for node in local_cluster.live_nodes():
        client = Redis(host="127.0.0.1", port=node.port)
        try:
            clients = await client.client_list()
            names = [c["name"] for c in clients if c["name"] == hub.app.state.hub.client_name]
            assert len(names) == (1 if node.port in owners else 0)
            mine = [c for c in doorbells.channels if local_cluster.master_of(c).port == node.port]
            if mine:
                counts = await client.execute_command("PUBSUB SHARDNUMSUB", *mine)
                assert [n for _, n in counts] == [1] * len(mine)
        finally:
            await client.aclose()


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
