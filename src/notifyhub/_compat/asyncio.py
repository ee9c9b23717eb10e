"""asyncio internals: `asyncio.Event._waiters`, tested with CPython 3.11, 3.12 and 3.13.

An `Event` keeps its waiters in a deque (a block of 64 slots, 760 bytes with the deque, even
when empty); uvicorn holds two events per connection, most of the hub's connections are
idle streams, and an event of theirs has at most one waiter. `lighten` swaps the empty
deque for a list (56 bytes): `Event` only appends to, removes from and iterates it. Outside
the tested versions, or where `Event` has no `_waiters` deque, `lighten` does nothing.
"""

from __future__ import annotations

import asyncio
import platform
from collections import deque

from notifyhub._compat import in_range, plain

TESTED = ">=3.11,<3.14"
"""The CPython versions the fast path is tested with."""


def _lighten(event: asyncio.Event) -> None:
    """Keep the event's waiters in a list; left alone while any wait (the deque is in use)."""
    if not event._waiters:
        event._waiters = []  # type: ignore[assignment]


def _leave(event: asyncio.Event) -> None:
    """The plain `lighten`: the event keeps its deque."""


def _select() -> bool:
    python = platform.python_version()
    if platform.python_implementation() != "CPython" or not in_range(python, TESTED):
        plain("asyncio", f"Python {python} is not the tested CPython {TESTED}")
        return False
    if not isinstance(getattr(asyncio.Event(), "_waiters", None), deque):
        plain("asyncio", "asyncio.Event has no _waiters deque")
        return False
    return True


FAST = _select()
"""Whether `lighten` swaps deques for lists (the tested versions)."""
lighten = _lighten if FAST else _leave
