"""The stream change reader: reads woken in one tick share one pipelined round trip."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from integration.test_inbox_store import make_notification
from notifyhub.realtime.reader import ChangeReader
from notifyhub.settings import Limits
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import Keys


async def _named_connections(redis: Redis, name: str) -> int:
    return sum(1 for client in await redis.client_list() if client.get("name") == name)


async def test_one_tick_of_reads_is_one_connection(redis: Redis, settings: Any) -> None:
    """60 streams woken together get their own users' changes over one connection."""
    name = f"reader-{uuid.uuid4().hex[:8]}"
    assert settings.redis_url is not None
    client = Redis.from_url(settings.redis_url, client_name=name)
    store = InboxStore(client, Keys(settings.redis_prefix), Limits())
    reader = ChangeReader(store, max_batch=100)
    users = [("default", f"r{i}") for i in range(60)]
    notes = [make_notification(title=f"for {user}") for _, user in users]
    for note, user in zip(notes, users, strict=True):
        await store.deliver(note, [user])
    try:
        results = await asyncio.gather(*(reader.changes(t, u, 0, 10) for t, u in users))
        assert await _named_connections(redis, name) == 1
    finally:
        await reader.aclose()
        await client.aclose()
    for result, note in zip(results, notes, strict=True):
        assert result.seq == 1
        assert [c.entry.id for c in result.entries] == [note.id]


async def test_a_stream_that_leaves_does_not_disturb_the_others(
    redis: Redis, settings: Any
) -> None:
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    reader = ChangeReader(store)
    await store.deliver(make_notification(), [("default", "stays")])
    leaving = asyncio.create_task(reader.changes("default", "leaves", 0, 10))
    staying = asyncio.create_task(reader.changes("default", "stays", 0, 10))
    await asyncio.sleep(0)  # both queued in this tick; the flush runs in the next
    leaving.cancel()
    assert (await staying).seq == 1
    with pytest.raises(asyncio.CancelledError):
        await leaving
    await reader.aclose()


async def test_redis_errors_reach_every_waiting_stream(settings: Any) -> None:
    dead = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
    reader = ChangeReader(InboxStore(dead, Keys(settings.redis_prefix), Limits()))
    outcomes = await asyncio.gather(
        reader.changes("default", "a", 0, 10),
        reader.changes("default", "b", 0, 10),
        return_exceptions=True,
    )
    assert all(isinstance(o, RedisConnectionError) for o in outcomes), outcomes
    await reader.aclose()
    await dead.aclose()
