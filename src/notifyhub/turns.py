"""Taking turns on the event loop: long work hands the loop back every few milliseconds.

One process serves every request and stream on one event loop, so a step that runs 30 ms
without an `await` that waits delays every other request by as much. A fan-out to 100,000
users is made of such steps (naming its users, packing its commands, counting its
replies); it runs them in slices and calls `Turns.take` between slices, which yields to
the loop once `SLICE_S` has passed since the last time it did. Other requests then wait
for a slice, not for the whole step (docs/scaling.md, "Big fan-outs take turns").

A turn is one pass of the loop: every callback ready then runs. A request crosses the loop
several times (its body, each Redis reply, its doorbell, its stream's write), so on a busy
hub it still waits a slice at each crossing. Work that may take its time (a deferred
fan-out, whose streams were already told) also rests: when the pass showed others waiting,
it sleeps `rest_s` as well, in which they cross the loop as often as they need, and Redis
and the CPU are theirs; on an idle hub it never rests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import TypeVar

T = TypeVar("T")

SLICE_S = 0.002
"""How long long work keeps the loop before handing it back."""

SLICE_ITEMS = 2_000
"""Items (users, lines) of one slice of a fan-out's Python: about one `SLICE_S` of it."""

TURN_CHECK = 256
"""A per-item Python loop asks `Turns.take` every this many items (a clock read each)."""

BUSY_S = 0.001
"""A pass of the loop longer than this: others were waiting (a resting `Turns` rests)."""


class Turns:
    """The turns of one piece of long work: `await take()` between its slices."""

    __slots__ = ("_ends", "_rest_s", "_slice_s")

    def __init__(self, slice_s: float | None = None, rest_s: float = 0.0) -> None:
        self._slice_s = SLICE_S if slice_s is None else slice_s
        self._rest_s = rest_s
        self._ends = time.perf_counter() + self._slice_s

    async def take(self) -> None:
        """Hand the loop back (one pass of it: every callback ready now runs) when this
        work has kept it for its slice, and rest `rest_s` when that pass took over
        BUSY_S; else return at once."""
        started = time.perf_counter()
        if started >= self._ends:
            await asyncio.sleep(0)
            if self._rest_s and time.perf_counter() - started > BUSY_S:
                await asyncio.sleep(self._rest_s)
            self._ends = time.perf_counter() + self._slice_s


async def sliced(
    items: Sequence[T], size: int = SLICE_ITEMS, slice_s: float | None = None, rest_s: float = 0.0
) -> AsyncIterator[Sequence[T]]:
    """`items` in slices of `size`, the loop's turn taken between them (`Turns`)."""
    turns = Turns(slice_s, rest_s)
    for start in range(0, len(items), size):
        if start:
            await turns.take()
        yield items[start : start + size]
