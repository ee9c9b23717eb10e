"""Doorbell fan-in, as `/metrics` shows it: two hubs on one Redis, each with its own
streams, hear every doorbell; only the one holding the user's stream counts it as local.
(Issue 38 measures this before changing who hears what; docs/scaling.md.)"""

from __future__ import annotations

import asyncio
from typing import Any

from integration.test_stream import open_stream, send
from notifyhub.settings import Settings


async def _doorbells(hub: Any) -> dict[str, float]:
    """This hub's doorbell counters, from its `/metrics`."""
    text = (await hub.client.get("/metrics")).text
    counted = {}
    for line in text.splitlines():
        if line.startswith("notifyhub_doorbell_"):
            name, value = line.rsplit(" ", 1)
            counted[name.removeprefix("notifyhub_doorbell_")] = float(value)
    return counted


async def _grown(hub: Any, before: dict[str, float], name: str) -> dict[str, float]:
    """The counters once `name` passed its value in `before` (the doorbell reaches each
    hub on its own Pub/Sub connection, in its own time)."""
    async with asyncio.timeout(5):
        while (now := await _doorbells(hub))[name] <= before.get(name, 0.0):
            await asyncio.sleep(0.02)
    return now


async def test_only_the_hub_holding_the_stream_counts_it_local(
    settings: Settings, start_hub: Any, publish_key: str, make_token: Any
) -> None:
    other_bytes, local_bytes = 'bytes_total{local="false"}', 'bytes_total{local="true"}'
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
        heard = await _grown(first, {}, 'lines_total{local="true"}')
        seen = await _grown(second, before, other_bytes)
    assert heard['lines_total{local="true"}'] >= 3 and heard[local_bytes] > 0
    assert seen[local_bytes] == before.get(local_bytes, 0.0) == 0.0
    assert seen['lines_total{local="true"}'] == 0.0
    assert seen['lines_total{local="false"}'] >= 1
