"""Each doorbell message a hub hears is counted once: its bytes and lines, and the share
for the users with a stream in this process (`notifyhub_doorbell_*_total{local}`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from notifyhub.metrics import Metrics
from notifyhub.realtime.hub import Hub
from notifyhub.store.doorbells import ANNOUNCE_MARK, DEFERRED_MARK, INLINE_MARK, Doorbells
from notifyhub.store.keys import Keys
from notifyhub.store.revocations import Revocation


def _hub() -> tuple[Hub, Metrics]:
    metrics = Metrics()
    hub = Hub("redis://unused", Doorbells(Keys("p:"), sharded=False), metrics, streams_per_user=2)
    hub.attach("t", "here")
    return hub, metrics


def _counted(metrics: Metrics) -> dict[str, float]:
    value = metrics.registry.get_sample_value
    return {
        f"{family} {local}": value(f"notifyhub_doorbell_{family}_total", {"local": local}) or 0.0
        for family in ("bytes", "lines")
        for local in ("true", "false")
    }


def test_a_plain_doorbell_counts_its_local_line_and_bytes() -> None:
    hub, metrics = _hub()
    message = b"t/elsewhere 4\nt/here 3\nt/nobody 9"
    hub.dispatch(message)
    local = len(b"t/here 3\n")
    assert _counted(metrics) == {
        "bytes true": local,
        "bytes false": len(message) - local,
        "lines true": 1,
        "lines false": 2,
    }


def test_a_header_counts_as_local_only_when_a_line_is() -> None:
    """A fan-out's notification (or an announcement's) is read for the local users it
    names; a message naming none is all someone else's."""
    hub, metrics = _hub()
    header = INLINE_MARK + b'{"id":"N","title":"hi"}'
    ours = header + b"\nt/here 3,1,1,3,e1"
    theirs = header + b"\nt/other 3,1,1,3,e1"
    hub.dispatch(ours)
    assert _counted(metrics)["bytes true"] == len(ours)
    announced = ANNOUNCE_MARK + b'{"id":"01JD3Q4M6T9W2Z8K5N7R1C0B3X"}\nt/other 2-e1'
    hub.dispatch(theirs)
    hub.dispatch(announced)
    counted = _counted(metrics)
    assert counted["bytes true"] == len(ours)
    assert counted["bytes false"] == len(theirs) + len(announced)
    assert (counted["lines true"], counted["lines false"]) == (1, 2)


def test_a_revocation_is_counted_as_bytes_only() -> None:
    hub, metrics = _hub()
    message = Revocation(key_id="k1").message()
    hub.dispatch(message)
    assert _counted(metrics) == {
        "bytes true": 0,
        "bytes false": len(message),
        "lines true": 0,
        "lines false": 0,
    }


def test_a_deferred_broadcast_asks_about_each_local_user_of_its_tenant_once() -> None:
    """A `%` message names no user and comes once, on the common channel: a process
    asks about every local user of the notification's tenant once (none of another
    tenant's), and counts the message as local when it had a user to ask about."""
    metrics = Metrics()
    doorbells = Doorbells(Keys("p:"), sharded=True)
    asked: list[tuple[str, list[str]]] = []

    async def seqs(nid: str, members: Sequence[str], known: bool) -> list[tuple[str, str]]:
        assert not known  # heard: the index is asked
        asked.append((nid, list(members)))
        return []

    hub = Hub("redis://unused", doorbells, metrics, streams_per_user=2, announce_seqs=seqs)
    ours = [f"t/u{i}" for i in range(40)]
    for member in [*ours, "other/u1"]:
        hub.attach(*member.split("/"))
    nid = "01JD3Q4M6T9W2Z8K5N7R1C0B3X"
    body = b'{"id":"%s","tenant":"t","title":"all"}' % nid.encode()

    async def hear() -> None:
        hub.dispatch(DEFERRED_MARK + body)
        await asyncio.gather(*hub._deferred)

    asyncio.run(hear())
    assert sorted(m for _, members in asked for m in members) == sorted(ours)
    assert all(n == nid for n, _ in asked)
    assert _counted(metrics)["bytes true"] == 1 + len(body)
