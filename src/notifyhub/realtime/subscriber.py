"""One stream's doorbell: O(1) memory however far behind the stream is.

Pub/Sub only says "user U changed, up to seq S". The stream then reads what it has
not sent from the user's change log in Redis, from its own cursor. So a burst of
changes coalesces into one wake-up, nothing queues per connection, and a stream that
missed a doorbell (a Pub/Sub reconnect) loses nothing: it is simply rung again.

Time is not the doorbell's business: the process's one `StreamClock` pings streams
that have been quiet and ends streams stuck in a send, reading the two timestamps the
stream keeps here. No stream holds a timer of its own.
"""

from __future__ import annotations

import asyncio


class Subscriber:
    """Rung by the hub when its user's inbox changed; awaited by one stream.

    A flag and a future made only while waiting, not an `asyncio.Event`: an Event
    carries a deque of about 760 bytes, and a hub holds one Subscriber per stream."""

    __slots__ = (
        "_pinged",
        "_rung",
        "_waiter",
        "closed",
        "last_sent",
        "latest",
        "member",
        "sending_since",
        "task",
        "timed_out",
    )

    def __init__(self, member: str) -> None:
        self.member = member
        self.latest = 0
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
        """A change up to `seq` exists; 0 means "re-read, something may be missed"."""
        if seq == 0 or seq > self.latest:
            self.latest = max(self.latest, seq)
            self._rung = True
            self._wake()

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
        """Wait for a ring, a close or a ping, and clear them: True for a ring or close
        (read the log), False for a ping alone (send a keep-alive)."""
        if not (self._rung or self._pinged):
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        rung, self._rung, self._pinged = self._rung, False, False
        return rung
