"""Recovery paths: a killed Pub/Sub connection loses nothing; the cleaner reclaims expiry."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from redis.asyncio import Redis
from ulid import ULID

from notifyhub.domain.notification import Notification
from notifyhub.metrics import Metrics
from notifyhub.settings import Limits, WorkerSettings
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import Keys, member
from notifyhub.workers.cleaner import Cleaner
from support.sse import EventReader


async def _kill_pubsub(redis: Redis, name: str) -> int:
    killed = 0
    for client in await redis.client_list(_type="pubsub"):
        if client.get("name") == name:
            killed += int(await redis.client_kill_filter(_id=client["id"]))
    return killed


async def test_pubsub_kill_then_resync(
    hub: Any, publish_key: str, make_token: Any, redis: Redis
) -> None:
    """Notifications published while the hub's Pub/Sub connection is down still arrive."""
    headers = {"Authorization": f"Bearer {make_token('pat')}"}
    hub_state = hub.app.state.hub
    async with (
        httpx.AsyncClient(timeout=10) as client,
        client.stream("GET", f"{hub.base_url}/v1/me/stream", headers=headers) as response,
    ):
        events = EventReader(response)
        await events.next()
        assert await _kill_pubsub(redis, hub_state.client_name) == 1
        body = {"recipients": {"users": ["pat"]}, "title": "during the gap"}
        posted = await hub.client.post(
            "/v1/notifications", json=body, headers={"Authorization": f"Bearer {publish_key}"}
        )
        event, _ = await events.until("notification", timeout=10)
        assert event.data["id"] == posted.json()["id"]
    assert hub.app.state.metrics.pubsub_reconnects_total._value.get() >= 1


async def test_cleaner_purges_only_expired(redis: Redis, settings: Any) -> None:
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, Limits())
    now = datetime.now(UTC)
    short = Notification(
        id=str(ULID()),
        tenant="default",
        title="short",
        created_at=now,
        expires_at=now + timedelta(milliseconds=300),
    )
    long = Notification(
        id=str(ULID()),
        tenant="default",
        title="long",
        created_at=now,
        expires_at=now + timedelta(seconds=60),
    )
    for n in (short, long):
        await store.deliver(n, [("default", "cleo")])
    cleaner = Cleaner(redis, keys, store, WorkerSettings(), Metrics())
    assert await cleaner.run_once() == 0  # nothing due yet
    await asyncio.sleep(0.4)
    inbox = keys.inbox("default", "cleo")
    assert await redis.hlen(inbox.items) == 2  # nobody read: still stored
    assert await cleaner.run_once() == 1
    assert await redis.hkeys(inbox.items) == [long.id.encode()]
    next_due = await redis.zscore(keys.expiry, member("default", "cleo"))
    assert next_due == int(long.expires_at.timestamp() * 1000)
    assert await cleaner.run_once() == 0


async def test_cleaner_skips_while_another_holds_the_lock(redis: Redis, settings: Any) -> None:
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, Limits())
    now = datetime.now(UTC)
    n = Notification(
        id=str(ULID()),
        tenant="default",
        title="x",
        created_at=now,
        expires_at=now + timedelta(milliseconds=100),
    )
    await store.deliver(n, [("default", "lock-user")])
    await asyncio.sleep(0.2)
    await redis.set(keys.lock("cleaner"), "someone-else", px=5000)
    cleaner = Cleaner(redis, keys, store, WorkerSettings(), Metrics())
    assert await cleaner.run_once() == 0
    await redis.delete(keys.lock("cleaner"))
    assert await cleaner.run_once() == 1
