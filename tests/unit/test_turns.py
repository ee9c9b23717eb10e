"""Long work takes turns on the event loop (notifyhub/turns.py): it hands the loop back
once its slice has passed, and not before; resting work also rests when others waited."""

from __future__ import annotations

import asyncio
import time
from itertools import pairwise

from notifyhub.turns import BUSY_S, SLICE_ITEMS, Turns, sliced


def _other(ran: list[str]) -> asyncio.Task[None]:
    """A task that is ready to run now and notes when it does."""

    async def other() -> None:
        ran.append("other")

    return asyncio.get_running_loop().create_task(other())


async def test_a_turn_within_the_slice_returns_at_once() -> None:
    ran: list[str] = []
    other = _other(ran)
    await Turns(slice_s=3600.0).take()
    assert ran == []  # the other task, ready all along, did not run
    await other
    assert ran == ["other"]


async def test_a_turn_past_the_slice_lets_ready_tasks_run() -> None:
    ran: list[str] = []
    other = _other(ran)
    await Turns(slice_s=0.0).take()
    assert ran == ["other"]
    await other


async def test_sliced_gives_every_item_once_in_order_in_slices_of_the_size() -> None:
    items = list(range(2 * SLICE_ITEMS + 3))
    parts = [list(part) async for part in sliced(items)]
    assert [len(p) for p in parts] == [SLICE_ITEMS, SLICE_ITEMS, 3]
    assert [i for p in parts for i in p] == items
    assert [p async for p in sliced([])] == []


class _Ticker:
    """A task counting the passes of the loop (it yields on every one), from its first."""

    def __init__(self) -> None:
        self.passes = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _Ticker:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        await asyncio.sleep(0)  # the ticker's first pass
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()

    async def _tick(self) -> None:
        while True:
            self.passes += 1
            await asyncio.sleep(0)


async def test_sliced_hands_the_loop_back_between_slices_not_before_the_first() -> None:
    """With every slice due (`slice_s` 0), a task yielding on every pass of the loop
    runs between any two slices, and not before the first."""
    seen = []
    async with _Ticker() as ticker:
        async for part in sliced(list(range(40)), size=10, slice_s=0.0):
            seen.append((len(part), ticker.passes))
    assert [n for n, _ in seen] == [10, 10, 10, 10]
    marks = [at for _, at in seen]
    assert marks[0] == 1
    assert all(b > a for a, b in pairwise(marks))


async def _passes_during(turns: Turns, busy_s: float) -> int:
    """The passes a ticker makes while `turns.take()` runs, after a task that holds the
    loop `busy_s` (blocking) was made ready before it."""

    async def busy() -> None:  # others' work keeping the loop (no await in it)
        ends = time.perf_counter() + busy_s
        while time.perf_counter() < ends:
            pass

    async with _Ticker() as ticker:
        held = asyncio.get_running_loop().create_task(busy())
        before = ticker.passes
        try:
            async with asyncio.timeout(30):
                await turns.take()
        finally:
            await held
        return ticker.passes - before


async def test_a_resting_turn_rests_when_others_kept_the_loop() -> None:
    """The pass held past BUSY_S: the work rests, and the ticker passes many times in it
    (one pass, without a rest)."""
    assert await _passes_during(Turns(slice_s=0.0, rest_s=0.05), busy_s=5 * BUSY_S) > 1
    assert await _passes_during(Turns(slice_s=0.0), busy_s=5 * BUSY_S) == 1


async def test_a_resting_turn_on_an_idle_loop_does_not_rest() -> None:
    """Nothing else waiting: a rest of an hour is not taken (the take would time out)."""
    assert await _passes_during(Turns(slice_s=0.0, rest_s=3600.0), busy_s=0.0) == 1
