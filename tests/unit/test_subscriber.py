"""A stream's doorbell: rings coalesce, late rings are kept, close wakes the waiter;
the process's one clock pings quiet streams and expires stuck sends."""

from __future__ import annotations

import asyncio

import pytest

from notifyhub.realtime.clock import StreamClock
from notifyhub.realtime.subscriber import Subscriber
from notifyhub.settings import StreamSettings


async def _blocks(sub: Subscriber) -> bool:
    """Whether `wait()` has nothing to return yet."""
    try:
        async with asyncio.timeout(0.01):
            await sub.wait()
    except TimeoutError:
        return True
    return False


async def test_a_ring_before_the_wait_is_kept_and_cleared_once() -> None:
    sub = Subscriber("t/u")
    sub.ring(3)
    sub.ring(5)  # coalesced with the first
    assert await sub.wait() is True
    assert await _blocks(sub)
    assert sub.latest == 5


async def test_a_ring_wakes_a_waiting_stream() -> None:
    sub = Subscriber("t/u")
    waiting = asyncio.create_task(sub.wait())
    await asyncio.sleep(0)
    sub.ring(1)
    assert await waiting is True


async def test_old_seqs_do_not_ring_but_zero_always_does() -> None:
    sub = Subscriber("t/u")
    sub.ring(4)
    await sub.wait()
    sub.ring(4)
    sub.ring(2)
    assert await _blocks(sub)
    sub.ring(0)  # "re-read": after a Pub/Sub reconnect
    assert await sub.wait() is True


async def test_a_ping_wakes_without_a_ring_and_a_ring_wins() -> None:
    sub = Subscriber("t/u")
    waiting = asyncio.create_task(sub.wait())
    await asyncio.sleep(0)
    sub.ping()
    assert await waiting is False  # send a keep-alive, do not read the log
    sub.ping()
    sub.ring(1)
    assert await sub.wait() is True
    assert await _blocks(sub)  # the ping was answered by the ring's write


async def test_close_wakes_and_marks_closed() -> None:
    sub = Subscriber("t/u")
    waiting = asyncio.create_task(sub.wait())
    await asyncio.sleep(0)
    sub.close()
    assert await waiting is True
    assert sub.closed


async def test_the_clock_pings_quiet_streams_only() -> None:
    clock = StreamClock(StreamSettings(ping_s=10, send_timeout_s=5))
    quiet, busy = Subscriber("t/quiet"), Subscriber("t/busy")
    clock.add(quiet)
    clock.add(busy)
    now = asyncio.get_running_loop().time()
    busy.last_sent = now + 9  # wrote 9 s after the other
    clock.tick(now + 10)
    assert await quiet.wait() is False
    assert await _blocks(busy)
    clock.discard(quiet)
    clock.tick(now + 30)
    assert await _blocks(quiet)  # gone from the clock
    assert await busy.wait() is False


async def test_the_clock_expires_a_send_past_the_timeout() -> None:
    clock = StreamClock(StreamSettings(ping_s=10, send_timeout_s=5))
    sub = Subscriber("t/slow")
    clock.add(sub)
    sub.task = asyncio.create_task(asyncio.sleep(60))  # stands in for a blocked send
    now = asyncio.get_running_loop().time()
    sub.sending_since = now
    clock.tick(now + 4)
    assert not sub.timed_out
    clock.tick(now + 6)
    assert sub.timed_out
    with pytest.raises(asyncio.CancelledError):
        await sub.task
