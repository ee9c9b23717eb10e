"""The Redis lock on a real Redis, and background loops that never die."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from notifyhub.metrics import Metrics
from notifyhub.store.lock import RedisLock
from notifyhub.workers.runner import Loop, Runner


@pytest.fixture
async def redis_client() -> AsyncIterator[Redis]:
    client = Redis.from_url(os.environ.get("NOTIFYHUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    yield client
    await client.aclose()


@pytest.fixture
async def lock_key(redis_client: Redis) -> AsyncIterator[str]:
    key = f"nhtest:{uuid.uuid4().hex}:lock:test"
    yield key
    await redis_client.delete(key)


async def test_only_one_of_two_locks_acquires(redis_client: Redis, lock_key: str) -> None:
    first, second = RedisLock(redis_client, lock_key, 5000), RedisLock(redis_client, lock_key, 5000)
    assert await first.acquire()
    assert not await second.acquire()
    assert await first.release()
    assert await second.acquire()


async def test_a_non_holder_cannot_release_or_extend(redis_client: Redis, lock_key: str) -> None:
    holder, other = RedisLock(redis_client, lock_key, 5000), RedisLock(redis_client, lock_key, 5000)
    assert await holder.acquire()
    assert not await other.release()
    assert not await other.extend()
    assert await redis_client.exists(lock_key)
    assert not await other.acquire()


async def test_expiry_frees_the_lock_and_the_late_holder_cannot_free_the_next(
    redis_client: Redis, lock_key: str
) -> None:
    late, next_holder = (
        RedisLock(redis_client, lock_key, 100),
        RedisLock(redis_client, lock_key, 5000),
    )
    assert await late.acquire()
    await asyncio.sleep(0.15)
    assert await next_holder.acquire()
    assert not await late.release()
    assert not await late.extend()
    assert await redis_client.pttl(lock_key) > 1000  # still the next holder's


async def test_extend_restarts_the_ttl(redis_client: Redis, lock_key: str) -> None:
    lock = RedisLock(redis_client, lock_key, 300)
    assert await lock.acquire()
    await asyncio.sleep(0.2)
    assert await lock.extend()
    assert await redis_client.pttl(lock_key) > 200


async def test_hold_yields_whether_taken_and_releases(redis_client: Redis, lock_key: str) -> None:
    first, second = RedisLock(redis_client, lock_key, 5000), RedisLock(redis_client, lock_key, 5000)
    async with first.hold() as held:
        assert held
        async with second.hold() as also_held:
            assert not also_held
        assert await redis_client.exists(lock_key)  # the loser released nothing
    assert not await redis_client.exists(lock_key)
    with pytest.raises(RuntimeError):
        async with first.hold():
            raise RuntimeError("step failed")
    assert not await redis_client.exists(lock_key)


def _no_loop_tasks() -> bool:
    return not [t for t in asyncio.all_tasks() if t.get_name().startswith("loop-")]


async def test_a_failing_step_is_retried_until_it_succeeds() -> None:
    calls = 0

    async def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise RuntimeError("transient")

    metrics = Metrics()
    loop = Loop("flaky", 0.01, flaky, metrics)
    runner = Runner()
    runner.add(loop)
    await runner.start()
    try:
        async with asyncio.timeout(5):
            while loop.last_success is None:
                await asyncio.sleep(0.01)
    finally:
        await runner.stop()
    assert calls >= 3
    assert metrics.loop_errors_total.labels(loop="flaky")._value.get() == 2
    assert metrics.loop_last_success_timestamp_seconds.labels(loop="flaky")._value.get() > 0
    assert _no_loop_tasks()


async def test_stop_cancels_every_task_even_one_that_swallows_a_cancel() -> None:
    async def stubborn() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # a badly behaved library: swallows the first cancel

    async def idle() -> None:
        await asyncio.sleep(60)

    runner = Runner()
    runner.add(Loop("stubborn", 0.01, stubborn, Metrics()))
    runner.add(Loop("idle", 0.01, idle, Metrics()))
    await runner.start()
    await asyncio.sleep(0.05)
    async with asyncio.timeout(5):
        await runner.stop()
    assert _no_loop_tasks()


async def test_stuck_reports_a_loop_whose_step_blocks() -> None:
    blocked = asyncio.Event()

    async def hangs() -> None:
        await blocked.wait()

    async def fine() -> None:
        return None

    runner = Runner()
    runner.add(Loop("hangs", 0.01, hangs, Metrics()))
    runner.add(Loop("fine", 0.01, fine, Metrics()))
    await runner.start()
    try:
        await asyncio.sleep(0.3)
        assert runner.stuck(after_s=0.2) == ["hangs"]
        blocked.set()
        await asyncio.sleep(0.05)
        assert runner.stuck(after_s=0.2) == []
    finally:
        await runner.stop()


async def test_a_loop_waiting_for_its_planned_step_is_not_stuck() -> None:
    """A step may plan a pause longer than the interval (the delayed mover idles so):
    the loop is not stuck until that pause is over by `after_s`."""

    async def fine() -> None:
        return None

    runner = Runner()
    runner.add(Loop("planned", 0.01, fine, Metrics(), pause_s=lambda: 3600.0))
    runner.add(Loop("ticking", 0.01, fine, Metrics()))
    await runner.start()
    try:
        await asyncio.sleep(0.3)
        assert runner.stuck(after_s=0.2) == []  # one step, then an hour's planned pause
        assert runner.loop("planned").last_success is not None
    finally:
        await runner.stop()


async def test_a_loop_that_keeps_failing_is_stuck() -> None:
    async def broken() -> None:
        raise RuntimeError("always")

    runner = Runner()
    runner.add(Loop("broken", 0.01, broken, Metrics()))
    await runner.start()
    try:
        await asyncio.sleep(0.2)
        assert runner.stuck(after_s=0.1) == ["broken"]
    finally:
        await runner.stop()


async def test_wake_runs_the_next_step_before_the_interval_ends() -> None:
    """A loop with an hour between steps runs again at once when woken, and only once."""
    calls: list[int] = []
    ran = asyncio.Event()

    async def step() -> None:
        calls.append(len(calls))
        ran.set()

    loop = Loop("woken", 3600.0, step, Metrics())
    task = asyncio.create_task(loop.run())
    try:
        async with asyncio.timeout(5):
            await ran.wait()
            ran.clear()
            loop.wake()
            await ran.wait()
        await asyncio.sleep(0.05)
        assert calls == [0, 1]  # one wake, one extra step: then back to the hour's pause
    finally:
        loop.stop()
        async with asyncio.timeout(5):
            await task
