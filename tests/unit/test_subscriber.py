"""A stream's doorbell: rings coalesce, late rings are kept, close wakes the waiter."""

from __future__ import annotations

import asyncio

from notifyhub.realtime.subscriber import Subscriber


async def test_a_ring_before_the_wait_is_kept_and_cleared_once() -> None:
    sub = Subscriber("t/u")
    sub.ring(3)
    sub.ring(5)  # coalesced with the first
    assert await sub.wait(1.0) is True
    assert await sub.wait(0.01) is False
    assert sub.latest == 5


async def test_a_ring_wakes_a_waiting_stream() -> None:
    sub = Subscriber("t/u")
    waiting = asyncio.create_task(sub.wait(5.0))
    await asyncio.sleep(0)
    sub.ring(1)
    assert await waiting is True


async def test_old_seqs_do_not_ring_but_zero_always_does() -> None:
    sub = Subscriber("t/u")
    sub.ring(4)
    await sub.wait(1.0)
    sub.ring(4)
    sub.ring(2)
    assert await sub.wait(0.01) is False
    sub.ring(0)  # "re-read": after a Pub/Sub reconnect
    assert await sub.wait(1.0) is True


async def test_a_ring_after_a_timeout_waits_for_the_next_wait() -> None:
    sub = Subscriber("t/u")
    assert await sub.wait(0.01) is False
    sub.ring(1)
    assert await sub.wait(0.01) is True


async def test_close_wakes_and_marks_closed() -> None:
    sub = Subscriber("t/u")
    waiting = asyncio.create_task(sub.wait(5.0))
    await asyncio.sleep(0)
    sub.close()
    assert await waiting is True
    assert sub.closed
