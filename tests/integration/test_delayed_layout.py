"""The delayed queue's Redis layout: priorities carried by due scores, "ready" derived
from the due zset, layout 1 data converted in place, cancel racing the mover, and the
transition log held back while a burst is moved."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import DelayedTransition
from notifyhub.db.unit import units
from notifyhub.errors import Conflict
from notifyhub.services.delayed import DelayedService, NewMessage, Reserved, TransitionLog
from notifyhub.store.delayed import DelayedStore
from notifyhub.store.keys import Keys, Queue
from support.delayed import DelayedCalls

SETS = 4
TENANT = "default"


def _service(
    redis: Redis, settings: Any, sessionmaker: async_sessionmaker[AsyncSession]
) -> DelayedCalls:
    store = DelayedStore(redis, Keys(settings.redis_prefix), SETS)
    return DelayedCalls(DelayedService(store, TransitionLog(units(sessionmaker))), sessionmaker)


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _drain(service: DelayedService, topic: str) -> list[Reserved]:
    taken: list[Reserved] = []
    while batch := await service.consume(Queue(TENANT, topic), 0, 100):
        taken += batch
    return taken


async def test_status_is_delayed_then_ready_then_reserved(
    redis: Redis, settings: Any, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    service = _service(redis, settings, sessionmaker)
    later = await service.push(NewMessage(TENANT, "st", 1, _now_ms() + 3_600_000))
    due = await service.push(NewMessage(TENANT, "st", 2, _now_ms() - 1))
    assert await service.status(TENANT, due) == "delayed"  # due, not moved yet
    await service.service.move()
    assert await service.status(TENANT, due) == "ready"
    assert await service.status(TENANT, later) == "delayed"
    [taken] = await service.service.consume(Queue(TENANT, "st"), 0, 10)
    assert taken.message.id == due
    assert await service.status(TENANT, due) == "reserved"


async def test_priority_then_due_time_across_sets(
    redis: Redis, settings: Any, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    """Many messages over every set, due together or a few ms apart: consumed by
    priority first, then due time, whatever set each landed in."""
    service = _service(redis, settings, sessionmaker)
    base = _now_ms() - 1000
    expected: dict[str, tuple[int, int]] = {}
    for i in range(60):
        priority, due_ms = i % 10, base + (i * 7) % 5
        message_id = await service.push(NewMessage(TENANT, "order", i, due_ms, priority=priority))
        expected[message_id] = (-priority, due_ms)
    await service.service.move(limit=7)
    taken = [m.message.id for m in await _drain(service.service, "order")]
    assert sorted(taken) == sorted(expected)
    keys = [expected[i] for i in taken]
    assert keys == sorted(keys)


async def _push_layout_1(
    redis: Redis, keys: Keys, message_id: str, topic: str, due_ms: int, priority: int, state: str
) -> None:
    """What a hub before layout 2 wrote: due_ms scores in `due:<topic>` (tenant "default":
    its queues' key names are the bare topic's)."""
    k = keys.delayed(keys.delayed_set(message_id, SETS))
    message = {
        "id": message_id,
        "topic": topic,
        "body": None,
        "priority": priority,
        "ttl_ms": 30_000,
        "biz_key": None,
        "due_at": "2026-01-01T00:00:00.000Z",
    }
    await redis.hset(k.msg, message_id, json.dumps(message))
    await redis.hset(
        k.state,
        mapping={message_id: state, f"{message_id}:p": priority, f"{message_id}:t": 30_000},
    )
    await redis.zadd(k.due_v1(topic), {message_id: due_ms})
    await redis.sadd(k.queues, topic)


async def test_layout_1_due_zsets_are_converted_by_the_mover(
    redis: Redis, settings: Any, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    keys = Keys(settings.redis_prefix)
    store = DelayedStore(redis, keys, SETS)
    service = _service(redis, settings, sessionmaker)
    topic, now_ms = f"v1-{uuid.uuid4().hex[:6]}", _now_ms()
    due = {p: f"V1DUE{p}{uuid.uuid4().hex[:20].upper()}" for p in (0, 5, 9)}
    for p, message_id in due.items():
        await _push_layout_1(redis, keys, message_id, topic, now_ms - 1000, p, "delayed||0")
    later = f"V1LATER{uuid.uuid4().hex[:19].upper()}"
    await _push_layout_1(redis, keys, later, topic, now_ms + 3_600_000, 3, "delayed||0")
    # cancelled by an older hub while still in its due zset: never offered
    gone = f"V1GONE{uuid.uuid4().hex[:20].upper()}"
    await _push_layout_1(redis, keys, gone, topic, now_ms - 1000, 9, "cancelled||0")

    queue = Queue(TENANT, topic)
    assert await store.status(due[5], queue) == "delayed"
    await service.service.move()
    taken = [m.message.id for m in await _drain(service.service, topic)]
    assert taken == [due[9], due[5], due[0]]
    assert await store.status(later, queue) == "delayed"
    assert await store.status(gone, queue) == "cancelled"
    k = keys.delayed(keys.delayed_set(later, SETS))
    assert await redis.zscore(k.due(topic), later) == (now_ms + 3_600_000) * 10 + 6
    for index in range(SETS):  # layout 1 keys are gone once drained
        assert not await redis.exists(keys.delayed(index).due_v1(topic))


@pytest.mark.slow
async def test_cancel_racing_the_mover_and_consumers_has_one_winner(
    redis: Redis, settings: Any, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    """Each id is either cancelled (204) and never offered, or offered and its cancel
    refused (409): never both, never neither."""
    services = [_service(redis, settings, sessionmaker) for _ in range(2)]
    topic, now_ms = f"cx-{uuid.uuid4().hex[:6]}", _now_ms()
    ids = [
        await services[0].push(NewMessage(TENANT, topic, i, now_ms + i % 40, priority=i % 10))
        for i in range(240)
    ]
    cancelled: set[str] = set()
    refused: set[str] = set()
    taken: list[str] = []

    async def cancel(message_id: str) -> None:
        try:
            await services[1].cancel(TENANT, message_id)
            cancelled.add(message_id)
        except Conflict:
            refused.add(message_id)

    async def move(calls: DelayedCalls) -> None:
        for _ in range(30):
            await calls.service.move(limit=5)

    async def consume() -> None:
        for _ in range(30):
            queue = Queue(TENANT, topic)
            taken.extend(m.message.id for m in await services[0].service.consume(queue, 0, 4))

    await asyncio.gather(*(move(s) for s in services), consume(), *(cancel(i) for i in ids[::-1]))
    await services[0].service.move()
    taken += [m.message.id for m in await _drain(services[0].service, topic)]
    assert len(taken) == len(set(taken))
    assert cancelled | refused == set(ids)
    assert cancelled.isdisjoint(taken)
    assert refused == set(taken)
    for message_id in list(cancelled)[:20]:
        assert await services[0].status(TENANT, message_id) == "cancelled"
    keys = Keys(settings.redis_prefix)
    for index in range(SETS):  # nothing left behind in any zset
        k = keys.delayed(index)
        assert await redis.zcard(k.due(topic)) == await redis.zcard(k.ready(topic)) == 0


async def _logged(sessionmaker: async_sessionmaker[AsyncSession], ids: list[str]) -> list[str]:
    async with sessionmaker() as session:
        rows = await session.execute(
            select(DelayedTransition.message_id)
            .where(DelayedTransition.message_id.in_(ids))
            .order_by(DelayedTransition.id)
        )
    return [r.message_id for r in rows]


async def test_transition_log_is_held_during_a_burst_but_never_lost(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    ids = [f"LOG{uuid.uuid4().hex[:23].upper()}" for _ in range(5)]
    log = TransitionLog(units(sessionmaker))
    log.add_ids(ids[:3], "ready", 1, "mover")
    log.hold(3600)
    assert await log.flush_unless_held() == 0  # the mover is busy: later
    assert await _logged(sessionmaker, ids) == []
    log.add_ids(ids[3:], "ready", 2, "mover")
    assert await log.flush() == 5  # an explicit flush (shutdown, restore) never waits
    assert await _logged(sessionmaker, ids) == ids

    capped = TransitionLog(units(sessionmaker), max_hold_s=0)  # held no longer than this
    more = [f"LOG{uuid.uuid4().hex[:23].upper()}" for _ in range(2)]
    capped.add_ids(more, "reserved", 0, "consumer")
    capped.hold(3600)
    assert await capped.flush_unless_held() == 2
    assert await _logged(sessionmaker, more) == more
