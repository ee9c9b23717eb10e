"""One stream's doorbell: O(1) memory however far behind the stream is.

Pub/Sub says "user U changed, up to seq S". The stream then reads what it has not
sent from the user's change log in Redis, from its own cursor. So a burst of changes
coalesces into one wake-up, nothing queues per connection, and a stream that missed a
doorbell (a Pub/Sub reconnect) loses nothing: it is simply rung again. Only a
fan-out's doorbell may carry a new copy's event (at most one kept here), which a
stream whose very next change it is sends without the read (`offer`); a broadcast's
announcement may carry its notification before any copy is written (`announce`), which
a stream that has sent nothing since sends at once.

Time is not the doorbell's business: the process's one `StreamClock` pings streams
that have been quiet and ends streams stuck in a send, reading the two timestamps the
stream keeps here. No stream holds a timer of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from notifyhub.realtime.events import MAX_AHEAD

Announced = tuple[int, str, str, bytes]
"""(seq, epoch, notification id, item JSON) of an announcement (`Subscriber.announce`)."""


class Subscriber:
    """Rung by the hub when its user's inbox changed; awaited by one stream.

    A flag and a future made only while waiting, not an `asyncio.Event`: an Event
    carries a deque, and a hub holds one Subscriber per stream."""

    __slots__ = (
        "_pinged",
        "_rung",
        "_waiter",
        "announce_now",
        "announced",
        "closed",
        "cursor",
        "epoch",
        "issued_at",
        "key_id",
        "last_sent",
        "latest",
        "member",
        "ready",
        "sending_since",
        "task",
        "timed_out",
    )

    def __init__(
        self, member: str, *, key_id: str | None = None, issued_at: float | None = None
    ) -> None:
        self.member = member
        self.key_id = key_id
        """The API key that opened this stream (an admin tail); None for a user's own."""
        self.issued_at = issued_at
        """When the user's token was issued (`iat`, seconds), if it says; revoking the
        user's tokens ends the stream unless its token is newer (realtime/hub.py)."""
        self.latest = 0
        self.cursor = -1
        """The last seq the stream sent, as of its last wait (-1: not waiting yet)."""
        self.epoch = ""
        """The epoch of `cursor` (store/lua/common.lua)."""
        self.ready: tuple[int, str, bytes] | None = None
        """A change offered with its frames (`offer`): (seq, epoch, frames)."""
        self.announced: list[Announced] | None = None
        """Notifications announced ahead of their copies (`announce`), not yet sent."""
        self.announce_now: Callable[[int, str, str, bytes], bool] | None = None
        """Shows an announcement to the stream while it waits, without waking it, when its
        connection can take it now (realtime/sse.py `_announce_now`); False: queue it."""
        self.closed = False
        self._rung = False
        self._pinged = False
        self._waiter: asyncio.Future[None] | None = None
        self.last_sent = 0.0
        """Loop time of the stream's last write (the clock pings after `ping_s` quiet)."""
        self.sending_since = 0.0
        """Loop time a write began that has not finished; 0.0 when not writing."""
        self.task: asyncio.Task[object] | None = None
        """The stream's task, which the clock cancels when a write outlives its timeout."""
        self.timed_out = False

    def ring(self, seq: int) -> None:
        """A change up to `seq` exists; 0 means "re-read, something may be missed".

        A seq below the latest one also rings: doorbells of two writers may cross, but
        the user's seq may also have gone back (Redis lost data), which the read tells."""
        if seq == 0 or seq > self.latest:
            self.latest = max(self.latest, seq)
        elif seq == self.latest:
            return
        self._rung = True
        self._wake()

    def offer(self, seq: int, epoch: str, frames: bytes) -> None:
        """Change `seq` of `epoch` came with its frames (a fan-out's doorbell,
        realtime/hub.py): kept for the stream when it is the stream's next change, so it
        sends them without a log read; the stream checks that again before sending.
        Seq 1 of any epoch is the next change of a stream that sent nothing. Rings either
        way."""
        if seq == self.cursor + 1 and (epoch == self.epoch or seq == 1):
            self.ready = (seq, epoch, frames)
        self.ring(seq)

    def announce(self, seq: int, epoch: str, nid: str, body: bytes) -> None:
        """A broadcast's notification `nid` (its item JSON `body`) is about to be copied
        into this user's inbox, whose seq was `seq` of `epoch` when it was announced: kept
        for a stream that had sent exactly that much (it cannot have sent the copy),
        which the stream checks again before sending it (realtime/sse.py)."""
        if seq == self.cursor and epoch == self.epoch:
            waiting = self._waiter is not None and not self._waiter.done()
            if (
                waiting
                and self.announced is None
                and self.announce_now is not None
                and self.announce_now(seq, epoch, nid, body)
            ):
                return
            if self.announced is None:
                self.announced = []
            if len(self.announced) < MAX_AHEAD:  # more are not shown: they come as copies
                self.announced.append((seq, epoch, nid, body))
            self._wake()

    def restart(self, seq: int) -> None:
        """The stream sent a `reset` as of `seq`: doorbells count from there again."""
        self.latest = seq

    def ping(self) -> None:
        """The stream has been quiet: wake it to send a keep-alive comment."""
        self._pinged = True
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._rung = True
        self._wake()

    def expire(self) -> None:
        """A write has outlived the send timeout: end the stream (the send raises)."""
        self.timed_out = True
        if self.task is not None:
            self.task.cancel()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self) -> bool:
        """Wait for a ring, a close, an announcement or a ping, and clear the ring and
        ping: True for a ring or close (read the log), False otherwise (send what was
        announced, else a keep-alive)."""
        if not (self._rung or self._pinged or self.announced):
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        rung, self._rung, self._pinged = self._rung, False, False
        return rung
