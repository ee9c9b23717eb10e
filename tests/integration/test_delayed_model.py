"""A Hypothesis state machine: the delayed queue against a plain-Python model.

Messages are pushed due a little in the past or an hour ahead (the scripts use Redis'
own clock, which a test cannot advance), with a random priority, some of them as a hub
before the current Redis layout queued them; moves, consumes (which must return the
best messages by priority, then due time), acks, cancels and "Redis lost everything,
then restore from PostgreSQL" interleave at random.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from redis.asyncio import Redis

from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.unit import units
from notifyhub.errors import Conflict
from notifyhub.services.delayed import DelayedService, NewMessage, TransitionLog
from notifyhub.store.delayed import DelayedStore
from notifyhub.store.keys import Keys, Queue
from support.delayed import DelayedCalls


class DelayedModel(RuleBasedStateMachine):
    redis_url = "redis://127.0.0.1:6379/0"
    database_url = ""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.redis = Redis.from_url(self.redis_url)
        self.engine = create_engine(self.database_url)
        self.prefix = f"nhtest:dqm:{uuid.uuid4().hex[:8]}:"
        maker = create_sessionmaker(self.engine)
        self.service = DelayedService(
            DelayedStore(self.redis, Keys(self.prefix), 3), TransitionLog(units(maker))
        )
        self.queue = DelayedCalls(self.service, maker)
        self.keys = Keys(self.prefix)
        self.queue_name = f"m{uuid.uuid4().hex[:6]}"
        self.queue_id = Queue(f"t{uuid.uuid4().hex[:6]}", self.queue_name)
        # id -> due (not moved) | ready | future | reserved | consumed | cancelled
        self.state: dict[str, str] = {}
        self.order: dict[str, tuple[int, int]] = {}  # id -> (-priority, due_ms)
        self.receipts: dict[str, str] = {}

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @rule(
        now=st.booleans(),
        priority=st.integers(0, 9),
        ago_ms=st.sampled_from([1000, 2000, 3000]),
        layout_1=st.booleans(),
    )
    def push(self, now: bool, priority: int, ago_ms: int, layout_1: bool) -> None:
        due_ms = int(time.time() * 1000) + (-ago_ms if now else 3_600_000)
        message = NewMessage(
            self.queue_id.tenant, self.queue_name, {"n": len(self.state)}, due_ms, priority=priority
        )
        message_id = self.run(self.queue.push(message))
        if layout_1:
            self.run(self.as_layout_1(message_id, due_ms))
        self.state[message_id] = "due" if now else "future"
        self.order[message_id] = (-priority, due_ms)

    async def as_layout_1(self, message_id: str, due_ms: int) -> None:
        """Queued the way a hub before the priority-carrying due scores did."""
        k, name = self.keys.delayed(self.keys.delayed_set(message_id, 3)), self.queue_id.key
        await self.redis.zrem(k.due(name), message_id)
        await self.redis.zadd(k.due_v1(name), {message_id: due_ms})

    def moved(self) -> None:
        self.state = {i: "ready" if s == "due" else s for i, s in self.state.items()}

    @rule()
    def move(self) -> None:
        self.run(self.service.move(limit=1000))
        self.moved()

    @rule(count=st.integers(1, 5))
    def consume(self, count: int) -> None:
        self.run(self.service.move(limit=1000))
        self.moved()
        ready = sorted(self.order[i] for i, s in self.state.items() if s == "ready")
        taken = self.run(self.service.consume(self.queue_id, 0, count))
        got = [self.order[m.message.id] for m in taken]
        assert got == ready[:count], (got, ready[:count])  # priority, then due time
        for reserved in taken:
            message_id = reserved.message.id
            assert self.state[message_id] == "ready", (message_id, self.state[message_id])
            self.state[message_id] = "reserved"
            self.receipts[message_id] = reserved.receipt

    @precondition(lambda self: any(s == "reserved" for s in self.state.values()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        message_id = data.draw(
            st.sampled_from(sorted(k for k, s in self.state.items() if s == "reserved"))
        )
        self.run(self.queue.ack(self.queue_id, message_id, self.receipts[message_id]))
        self.state[message_id] = "consumed"

    @precondition(lambda self: self.state)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        message_id = data.draw(st.sampled_from(sorted(self.state)))
        expected_ok = self.state[message_id] in ("due", "ready", "future")
        try:
            self.run(self.queue.cancel(self.queue_id.tenant, message_id))
            assert expected_ok, self.state[message_id]
            self.state[message_id] = "cancelled"
        except Conflict:
            assert not expected_ok

    @rule()
    def lose_redis_then_restore(self) -> None:
        async def lose() -> None:
            async for key in self.redis.scan_iter(match=self.prefix + "*", count=1000):
                await self.redis.delete(key)

        self.run(lose())
        self.run(self.queue.restore(expired=True, tenant=self.queue_id.tenant))
        for message_id, status in self.state.items():
            if status in ("ready", "reserved"):  # queued again as due (reserved: never acked)
                self.state[message_id] = "due"

    @invariant()
    def statuses_agree(self) -> None:
        for message_id, status in self.state.items():
            # Redis, else PostgreSQL
            got = self.run(self.queue.status(self.queue_id.tenant, message_id))
            expected = "delayed" if status in ("due", "future") else status
            assert got == expected, (message_id, status, got)

    def teardown(self) -> None:
        async def clean() -> None:
            async for key in self.redis.scan_iter(match=self.prefix + "*", count=1000):
                await self.redis.delete(key)
            await self.redis.aclose()
            await self.engine.dispose()

        self.run(clean())
        self.loop.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_delayed_queue_matches_the_model(settings: Any, database_url: str) -> None:
    DelayedModel.redis_url = settings.redis_url
    DelayedModel.database_url = database_url
    DelayedModel.TestCase.settings = hsettings(
        max_examples=20,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    DelayedModel.TestCase().runTest()
