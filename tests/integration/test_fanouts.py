"""Deferred fan-outs placed after their 202 (services/fanouts.py): batch by batch, resumed
by another process where their holder stopped, stopped by a recall."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from integration.test_inbox_store import make_notification
from notifyhub.metrics import Metrics
from notifyhub.services.fanouts import LEASE_MS, Fanouts
from notifyhub.settings import Limits, Settings
from notifyhub.store.fanouts import FanoutRecords, lost
from notifyhub.store.inbox import InboxStore, TenantUsers
from notifyhub.store.keys import Keys

USERS = [f"crowd-{n}" for n in range(9)]


def _placer(redis: Redis, settings: Settings) -> tuple[InboxStore, Fanouts]:
    """A process's store and placer, in batches of 2 users."""
    limits = Limits(defer_batch=2)
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, limits)
    records = FanoutRecords(redis, keys, lease_ms=LEASE_MS)
    return store, Fanouts(store, records, limits, Metrics())


async def _totals(store: InboxStore, users: list[str], tenant: str = "default") -> list[int]:
    return [(await store.counts(tenant, user))[0].total for user in users]


async def test_a_fan_out_is_placed_after_it_starts(redis: Redis, settings: Settings) -> None:
    store, fanouts = _placer(redis, settings)
    note = make_notification(title="to the crowd")
    await store.announce_deferred(note, TenantUsers("default", USERS))
    await fanouts.start(note, len(USERS), pull=False, trace=None)
    await fanouts.drain()
    assert await _totals(store, USERS) == [1] * len(USERS)
    assert await fanouts.progress(note.id) is None  # its record gone once placed
    assert await redis.scard(Keys(settings.redis_prefix).fanouts) == 0  # type: ignore[misc]


async def test_a_stopped_fan_out_is_resumed_after_its_last_batch(
    redis: Redis, settings: Settings
) -> None:
    """A process stops placing (killed, or its Redis gone: its lease runs out) after its
    first batch; another takes it over and writes every batch after it, once: a user of
    the first batch who deleted their copy meanwhile does not get it back."""
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, Limits())
    records = FanoutRecords(redis, keys, lease_ms=0)  # its lease runs out at once
    crowd = [f"many-{n}" for n in range(300)]  # past a small set's one-reply SSCAN
    note = make_notification(title="halfway")
    await store.announce_deferred(note, TenantUsers("default", crowd))
    fanout = await records.create(note, len(crowd), pull=False, trace=None)
    end, first = await records.scan(note.id, fanout.cursor, 100)
    step = records.step(fanout, end)
    done = [m[len("default/") :] for m in first]
    await store.placement(note, TenantUsers("default", done), defer=True, step=step)
    if store.cluster:  # (there the record moves after the batch)
        assert await records.advance(step, len(first))
    assert 0 < len(done) < len(crowd)
    assert await store.remove("default", done[0], [note.id]) == 1

    _, second = _placer(redis, settings)
    assert await second.resume_once() == 1
    await second.drain()
    after = dict(zip(crowd, await _totals(store, crowd), strict=True))
    assert after == {user: 0 if user == done[0] else 1 for user in crowd}
    assert await second.progress(note.id) is None
    assert await second.resume_once() == 0  # nothing left to resume


async def test_a_batch_of_a_holder_that_lost_its_fan_out_writes_nothing(
    redis: Redis, settings: Settings
) -> None:
    """The stopped holder's batch, after another took the fan-out over: refused in the
    script that would write it (one Redis), nothing pushed."""
    if InboxStore(redis, Keys(settings.redis_prefix), Limits()).cluster:
        pytest.skip("on a Cluster a batch's record moves after its writes (store/fanouts.py)")
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, Limits())
    records = FanoutRecords(redis, keys, lease_ms=0)
    note = make_notification(title="taken over")
    users = TenantUsers("default", ["late-a", "late-b"])
    await store.announce_deferred(note, users)
    stale = await records.create(note, 2, pull=False, trace=None)
    taken = await records.claim(note.id)
    assert taken is not None and taken.token != stale.token
    with pytest.raises(ResponseError) as refused:
        await store.placement(note, users, defer=True, step=records.step(stale, "done"))
    assert lost(refused.value)
    assert await _totals(store, ["late-a", "late-b"]) == [0, 0]
    placed = await store.placement(note, users, defer=True, step=records.step(taken, "done"))
    assert placed.seqs == [1, 1] and await _totals(store, ["late-a", "late-b"]) == [1, 1]


@pytest.fixture
def slow_fanouts(settings: Settings) -> Settings:
    """Fan-outs of 2 users or more deferred, placed a user at a time with a long pause."""
    update = {"defer_fanout_at": 2, "defer_batch": 1, "defer_pause_ms": 300}
    return settings.model_copy(update={"limits": settings.limits.model_copy(update=update)})


async def test_a_deferred_publish_answers_first_and_a_recall_stops_its_placement(
    slow_fanouts: Settings,
    start_hub: Any,
    create_key: Callable[..., Awaitable[str]],
    make_token: Any,
    redis: Redis,
) -> None:
    """The POST answers before the copies are written (the trace shows the placement under
    way, to its own tenant only); a recall meanwhile leaves no copy anywhere, none written
    after it."""
    async with start_hub(slow_fanouts) as hub:
        acme = {"Authorization": f"Bearer {await create_key('acme', 'publish', 'acme')}"}
        acme_admin = {"Authorization": f"Bearer {await create_key('acme-a', 'admin', 'acme')}"}
        globex = {"Authorization": f"Bearer {await create_key('globex-a', 'admin', 'globex')}"}
        body = {"tenant": "acme", "recipients": {"users": USERS[:5]}, "title": "all of acme"}
        sent = await hub.client.post("/v1/notifications", json=body, headers=acme)
        assert sent.status_code == 202 and sent.json()["recipients"] == 5
        nid = sent.json()["id"]
        trace_url = f"/v1/admin/notifications/{nid}/trace"
        trace = await hub.client.get(trace_url, params={"tenant": "acme"}, headers=acme_admin)
        placing = trace.json()["placing"]
        assert placing["users"] == 5 and placing["placed"] < 5
        other = await hub.client.get(trace_url, params={"tenant": "globex"}, headers=globex)
        assert other.status_code == 404

        recalled = await hub.client.delete(
            f"/v1/notifications/{nid}", params={"tenant": "acme"}, headers=acme
        )
        assert recalled.status_code == 204
        await hub.app_state["fanouts"].drain()
        for user in USERS[:5]:
            auth = {"Authorization": f"Bearer {make_token(user, 'acme')}"}
            listed = await hub.client.get("/v1/me/notifications", headers=auth)
            assert listed.json()["items"] == [], user
        trace = await hub.client.get(trace_url, params={"tenant": "acme"}, headers=acme_admin)
        assert trace.json()["placing"] is None
