"""The request deadline: one budget for every Redis and PostgreSQL call a request makes.

The API sets it for each request (api/deadline.py). It bounds how long a request waits
on stores that do not answer, not how much work it does: the rare request that waits on
purpose (a long poll) renews it between rounds, and a big fan-out renews it each time
one of its batches' round trips ends (services/ingest.py, store/scripts.py
`pipelined_each`), so each round or batch is bounded by a whole budget, not by what the
ones before left over. A store that stops answering still cuts a fan-out short, one
budget after its last batch (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar


class Deadline:
    """A request's deadline: an `asyncio.Timeout` around its work and how long it gives."""

    __slots__ = ("lifted", "seconds", "timeout")

    def __init__(self, timeout: asyncio.Timeout, seconds: float) -> None:
        self.timeout = timeout
        self.seconds = seconds
        self.lifted = False

    def renew(self) -> None:
        """A whole budget again, from now (unless lifted or already past)."""
        if not self.lifted and not self.timeout.expired():
            self.timeout.reschedule(asyncio.get_running_loop().time() + self.seconds)

    def lift(self) -> None:
        """No deadline any more: the response has started (an event stream lives on)."""
        self.lifted = True
        if not self.timeout.expired():  # (an expired one cannot be rescheduled)
            self.timeout.reschedule(None)


CURRENT: ContextVar[Deadline | None] = ContextVar("notifyhub_deadline", default=None)
"""The deadline of the request being served (None outside a request: workers, the CLI)."""


def renew() -> None:
    """Renew the current request's deadline, if there is one (see `Deadline.renew`)."""
    deadline = CURRENT.get()
    if deadline is not None:
        deadline.renew()
