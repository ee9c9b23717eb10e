"""One stream's doorbell: O(1) memory however far behind the stream is.

Pub/Sub only says "user U changed, up to seq S". The stream then reads what it has
not sent from the user's change log in Redis, from its own cursor. So a burst of
changes coalesces into one wake-up, nothing queues per connection, and a stream that
missed a doorbell (a Pub/Sub reconnect) loses nothing: it is simply rung again.
"""

from __future__ import annotations

import asyncio


class Subscriber:
    """Rung by the hub when its user's inbox changed; awaited by one stream.

    A flag and a future made only while waiting, not an `asyncio.Event`: an Event
    carries a deque of about 760 bytes, and a hub holds one Subscriber per stream."""

    __slots__ = ("_rung", "_waiter", "closed", "latest", "member")

    def __init__(self, member: str) -> None:
        self.member = member
        self.latest = 0
        self.closed = False
        self._rung = False
        self._waiter: asyncio.Future[None] | None = None

    def ring(self, seq: int) -> None:
        """A change up to `seq` exists; 0 means "re-read, something may be missed"."""
        if seq == 0 or seq > self.latest:
            self.latest = max(self.latest, seq)
            self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._rung = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self, timeout_s: float) -> bool:
        """Wait for a ring and clear it; False on timeout (a late ring stays set)."""
        if not self._rung:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout_s):
                    await self._waiter
            except TimeoutError:
                return False
            finally:
                self._waiter = None
        self._rung = False
        return True
