"""The expiry cleaner on a real Redis: expired copies go, later ones and their index stay."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis
from ulid import ULID

from notifyhub.domain.notification import Notification, to_ms
from notifyhub.metrics import Metrics
from notifyhub.settings import Limits, WorkerSettings
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import Keys, member
from notifyhub.workers.cleaner import Cleaner


@pytest.fixture
async def redis_client() -> AsyncIterator[Redis]:
    client = Redis.from_url(os.environ.get("NOTIFYHUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    yield client
    await client.aclose()


@pytest.fixture
async def keys(redis_client: Redis) -> AsyncIterator[Keys]:
    prefix = f"nhtest:{uuid.uuid4().hex}:"
    yield Keys(prefix)
    async for key in redis_client.scan_iter(match=f"{prefix}*", count=1000):
        await redis_client.unlink(key)


def _notification(ttl: timedelta) -> Notification:
    now = datetime.now(UTC)
    return Notification(
        id=str(ULID()), tenant="default", title="t", created_at=now, expires_at=now + ttl
    )


async def test_cleaner_removes_expired_copies_and_keeps_later_ones(
    redis_client: Redis, keys: Keys
) -> None:
    store = InboxStore(redis_client, keys, Limits())
    metrics = Metrics()
    cleaner = Cleaner(redis_client, keys, store, WorkerSettings(), metrics)
    short = _notification(timedelta(seconds=1))
    await store.place(short, [("default", "alice"), ("default", "bob")])
    long = _notification(timedelta(minutes=10))
    await store.place(long, [("default", "bob")])

    assert await cleaner.run_once() == 0  # nothing due yet
    await asyncio.sleep(1.1)
    assert await cleaner.run_once() == 2

    alice, bob = keys.inbox("default", "alice"), keys.inbox("default", "bob")
    assert await redis_client.hlen(alice.items) == 0
    assert await redis_client.zscore(keys.expiry, member("default", "alice")) is None
    assert await redis_client.hkeys(bob.items) == [long.id.encode()]
    next_due = await redis_client.zscore(keys.expiry, member("default", "bob"))
    assert next_due == to_ms(long.expires_at)
    assert await cleaner.run_once() == 0
    assert metrics.cleaner_runs_total._value.get() == 3
    assert metrics.cleaner_purged_total._value.get() == 2


async def test_a_cleaner_without_the_lock_does_nothing(redis_client: Redis, keys: Keys) -> None:
    store = InboxStore(redis_client, keys, Limits())
    await store.place(_notification(timedelta(milliseconds=100)), [("default", "carol")])
    await asyncio.sleep(0.2)
    first = Cleaner(redis_client, keys, store, WorkerSettings(), Metrics())
    second = Cleaner(redis_client, keys, store, WorkerSettings(), Metrics())

    assert await redis_client.set(keys.lock("cleaner"), "first-holder", px=5000)
    assert await second.run_once() == 0
    assert await redis_client.hlen(keys.inbox("default", "carol").items) == 1
    assert await redis_client.zscore(keys.expiry, member("default", "carol")) is not None
    await redis_client.delete(keys.lock("cleaner"))
    assert await first.run_once() == 1
    assert not await redis_client.exists(keys.lock("cleaner"))  # released after the pass


async def test_a_pass_takes_at_most_one_batch(redis_client: Redis, keys: Keys) -> None:
    store = InboxStore(redis_client, keys, Limits())
    users = [("default", f"user-{i}") for i in range(5)]
    await store.place(_notification(timedelta(milliseconds=100)), users)
    await asyncio.sleep(0.2)
    cleaner = Cleaner(redis_client, keys, store, WorkerSettings(cleaner_batch=2), Metrics())
    assert [await cleaner.run_once() for _ in range(4)] == [2, 2, 1, 0]
    assert await redis_client.zcard(keys.expiry) == 0


async def test_a_copy_delivered_after_the_purge_stays_indexed(
    redis_client: Redis, keys: Keys
) -> None:
    """The race the cleaner documents: its index entry must survive an emptied inbox."""
    store = InboxStore(redis_client, keys, Limits())
    await store.place(_notification(timedelta(milliseconds=100)), [("default", "dave")])
    await asyncio.sleep(0.2)
    late = _notification(timedelta(minutes=5))
    purge = store.purge

    async def purge_then_ingest(tenant: str, user: str) -> tuple[int, int | None]:
        result = await purge(tenant, user)
        if result[1] is None:  # the inbox is empty: an ingest lands right now
            await store.place(late, [(tenant, user)])
        return result

    store.purge = purge_then_ingest  # type: ignore[method-assign]
    cleaner = Cleaner(redis_client, keys, store, WorkerSettings(), Metrics())
    assert await cleaner.run_once() == 1
    due = await redis_client.zscore(keys.expiry, member("default", "dave"))
    assert due == to_ms(late.expires_at)
