"""A stream's doorbell: rings coalesce, late rings are kept, close wakes the waiter;
the process's one clock pings quiet streams and expires stuck sends."""

from __future__ import annotations

import asyncio

import pytest

from notifyhub.metrics import Metrics
from notifyhub.realtime.clock import StreamClock
from notifyhub.realtime.events import MAX_AHEAD, frame
from notifyhub.realtime.hub import Hub
from notifyhub.realtime.subscriber import Subscriber
from notifyhub.settings import StreamSettings
from notifyhub.store.doorbells import ANNOUNCE_MARK, INLINE_MARK, Doorbells, traced
from notifyhub.store.keys import Keys


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


async def test_a_repeated_seq_does_not_ring_a_lower_one_and_zero_do() -> None:
    sub = Subscriber("t/u")
    sub.ring(4)
    await sub.wait()
    sub.ring(4)
    assert await _blocks(sub)
    sub.ring(2)  # the user's seq went back (Redis lost data?), or doorbells crossed
    assert await sub.wait() is True and sub.latest == 4
    sub.ring(0)  # "re-read": after a Pub/Sub reconnect
    assert await sub.wait() is True
    sub.restart(1)  # the stream sent a reset as of seq 1: doorbells count from there
    sub.ring(2)
    assert await sub.wait() is True and sub.latest == 2


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


async def test_an_offered_change_is_kept_only_when_it_is_the_next_one() -> None:
    behind, next_up, other_epoch = Subscriber("t/u"), Subscriber("t/u"), Subscriber("t/u")
    behind.cursor = next_up.cursor = other_epoch.cursor = 4
    behind.epoch = next_up.epoch = "e1"
    behind.offer(6, "e1", b"six")  # change 5 is missing here: the stream reads the log
    assert behind.ready is None
    assert await behind.wait() is True and behind.latest == 6
    next_up.offer(5, "e1", b"five")
    assert next_up.ready == (5, "e1", b"five")
    assert await next_up.wait() is True and next_up.latest == 5
    other_epoch.epoch = "e0"  # Redis lost the data seq 4 was of: seq 5 now is another one
    other_epoch.offer(5, "e1", b"five")
    assert other_epoch.ready is None
    assert await other_epoch.wait() is True
    other_epoch.cursor = 0  # sent nothing (or reset to an empty inbox): seq 1 of any epoch
    other_epoch.offer(1, "e2", b"one")
    assert other_epoch.ready == (1, "e2", b"one")


def test_a_fan_out_doorbell_builds_the_events_of_users_with_local_streams() -> None:
    """The hub builds a copy's notification and counts events from the doorbell, byte
    for byte what a log read gives, and offers them; plain lines just ring."""
    hub = Hub(
        "redis://unused",
        Doorbells(Keys("p:", pubsub_shards=1), sharded=False),
        Metrics(),
        streams_per_user=2,
    )
    caught_up, behind, plain = hub.attach("t", "a"), hub.attach("t", "b"), hub.attach("t", "c")
    legacy = hub.attach("t", "d")
    caught_up.cursor, behind.cursor, plain.cursor, legacy.cursor = 2, 0, 0, 6
    caught_up.epoch = behind.epoch = "e1"
    body = b'{"id":"N","title":"hi"}'
    changed = [("t/a", "3,1,1,3,e1"), ("t/b", "5,2,2,5,e1"), ("t/c", 0), ("t/d", "7,1,1,1")]
    changed += [("t/nobody-here", "1,1,1,1,e1")]
    hub.dispatch(
        Doorbells(Keys("p:", pubsub_shards=1), sharded=False).messages(changed, INLINE_MARK + body)[
            0
        ][1]
    )
    expected = frame("counts", 3, "e1", {"unread": 1, "unseen": 1, "total": 3, "seq": 3})
    notification = b"event: notification\nid: 3-e1\ndata: " + body + b"\n\n"
    assert caught_up.ready == (3, "e1", notification + expected)
    assert behind.ready is None and behind.latest == 5
    assert plain.ready is None and plain.latest == 0
    assert legacy.ready is not None and b"id: 7\n" in legacy.ready[2]  # a hub before epochs


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "re-read"])
def test_a_traced_doorbell_rings_a_hub_with_tracing_off(inline: bool) -> None:
    """A publisher with tracing on, a hub with it off (a fleet mid-change): the trace line
    names no user, so it is skipped, and no stream keeps a trace."""
    hub = Hub(
        "redis://unused",
        Doorbells(Keys("p:", pubsub_shards=1), sharded=False),
        Metrics(),
        streams_per_user=5,
    )
    sub = hub.attach("t", "a")
    sub.cursor, sub.epoch = 2, "e1"
    trace = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    header = traced(INLINE_MARK + b'{"id":"N"}' if inline else b"", trace)
    line: tuple[str, int | str] = ("t/a", "3,1,1,3,e1") if inline else ("t/a", 3)
    hub.dispatch(
        Doorbells(Keys("p:", pubsub_shards=1), sharded=False).messages([line], header)[0][1]
    )
    assert sub.latest == 3 and (sub.ready is not None) is inline
    assert hub.traced == {}


async def test_an_announcement_is_kept_only_for_a_stream_at_its_seq() -> None:
    """A broadcast announced before its copies (store/doorbells.py `^`) reaches the
    streams that have sent exactly the seq (and epoch) its line names: those cannot have
    sent the copy. Others, and users with no local stream, are left to the copy's own
    doorbell. The waiter wakes without a ring: nothing needs reading."""
    hub = Hub(
        "redis://unused",
        Doorbells(Keys("p:", pubsub_shards=1), sharded=False),
        Metrics(),
        streams_per_user=2,
    )
    at, past, other_epoch, fresh = (hub.attach("t", u) for u in ("a", "b", "c", "d"))
    at.cursor = past.cursor = other_epoch.cursor = 4
    at.epoch = past.epoch = "e1"
    other_epoch.epoch = "e0"
    fresh.cursor = 0
    nid = "01JD3Q4M6T9W2Z8K5N7R1C0B3X"
    body = b'{"id":"%s","title":"all hands"}' % nid.encode()
    lines = [b"t/a 4-e1", b"t/b 3-e1", b"t/c 4-e1", b"t/d 0-", b"t/nobody 2-e1", b"t/a x-e1"]
    hub.dispatch(b"\n".join([ANNOUNCE_MARK + body, *lines]))
    assert at.announced == [(4, "e1", nid, body)]
    assert fresh.announced == [(0, "", nid, body)]
    assert past.announced is None and other_epoch.announced is None
    assert not at._rung and at.latest == 0  # nothing to read
    assert await sub_wait_returns(at) is False  # woken to send it, not to read


async def sub_wait_returns(sub: Subscriber) -> bool:
    async with asyncio.timeout(1):
        return await sub.wait()


async def test_an_idle_stream_takes_an_announcement_without_waking() -> None:
    """A stream waiting idle whose connection can write at once (`announce_now`, the hub's own
    HTTP protocol) is handed the announcement and stays asleep; when its connection
    cannot take it (False), or the stream is not waiting, or an earlier one is queued,
    the announcement is queued and the stream woken, in order."""
    handed: list[tuple[int, str, str, bytes]] = []
    takes = True

    def announce_now(seq: int, epoch: str, nid: str, body: bytes) -> bool:
        handed.append((seq, epoch, nid, body))
        return takes

    sub = Subscriber("t/a")
    sub.cursor, sub.epoch, sub.announce_now = 4, "e1", announce_now
    sub.announce(4, "e1", "n0", b"{}")  # not waiting yet: queued
    assert handed == [] and sub.announced == [(4, "e1", "n0", b"{}")]
    assert await sub_wait_returns(sub) is False
    sub.announced = None

    waiter = asyncio.create_task(sub.wait())
    await asyncio.sleep(0)  # waiting now
    sub.announce(4, "e1", "n1", b"{}")
    assert handed == [(4, "e1", "n1", b"{}")] and sub.announced is None
    for _ in range(3):  # a woken waiter would finish within these turns of the loop
        await asyncio.sleep(0)
    assert not waiter.done()  # written without waking the stream

    takes = False
    sub.announce(4, "e1", "n2", b"{}")  # the connection cannot take it now
    sub.announce(4, "e1", "n3", b"{}")  # one is queued already: queued behind it
    assert [a[2] for a in handed] == ["n1", "n2"]
    assert sub.announced == [(4, "e1", "n2", b"{}"), (4, "e1", "n3", b"{}")]
    async with asyncio.timeout(1):
        assert await waiter is False


def test_a_stream_that_does_not_wait_keeps_at_most_max_ahead_announcements() -> None:
    """A stream stuck in a send takes announcements of one seq into its queue only up to
    the MAX_AHEAD it could show at once: the rest reach it as copies, through the log."""
    sub = Subscriber("t/a")
    sub.cursor, sub.epoch = 4, "e1"
    for n in range(MAX_AHEAD + 50):
        sub.announce(4, "e1", f"n{n}", b"{}")
    assert sub.announced is not None
    assert [a[2] for a in sub.announced] == [f"n{n}" for n in range(MAX_AHEAD)]
