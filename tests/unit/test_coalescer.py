"""The coalescer (notifyhub/store/coalesce.py): requests of one tick go in one call; with
`max_in_flight`, requests made while the calls are out wait and go together in the next."""

from __future__ import annotations

import asyncio

import pytest

from notifyhub.store.coalesce import Coalescer


class _Served:
    """A `serve` that notes each batch and answers when `release` is set."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release = asyncio.Event()

    async def __call__(self, batch: list[int]) -> list[int]:
        self.batches.append(list(batch))
        await self.release.wait()
        if 0 in batch:
            raise ValueError("a bad batch")
        return [request * 10 for request in batch]


async def _one_per_tick(
    coalescer: Coalescer[int, int], requests: list[int]
) -> list[asyncio.Task[int]]:
    """Each request made in a tick of its own, as streams open one by one in a storm."""
    tasks = []
    for request in requests:
        tasks.append(asyncio.create_task(coalescer(request)))
        for _ in range(3):  # the request is made and its tick's flush has run
            await asyncio.sleep(0)
    return tasks


async def test_requests_made_while_a_call_is_out_go_together_in_the_next() -> None:
    served = _Served()
    coalescer: Coalescer[int, int] = Coalescer(served, max_in_flight=1)
    tasks = await _one_per_tick(coalescer, [1, 2, 3, 4])
    assert served.batches == [[1]]  # the rest wait for it
    served.release.set()
    assert await asyncio.gather(*tasks) == [10, 20, 30, 40]
    assert served.batches == [[1], [2, 3, 4]]


async def test_without_a_bound_each_tick_is_a_call_of_its_own() -> None:
    served = _Served()
    coalescer: Coalescer[int, int] = Coalescer(served)
    tasks = await _one_per_tick(coalescer, [1, 2, 3])
    assert served.batches == [[1], [2], [3]]
    served.release.set()
    assert await asyncio.gather(*tasks) == [10, 20, 30]


async def test_held_requests_go_in_batches_of_at_most_max_batch() -> None:
    served = _Served()
    coalescer: Coalescer[int, int] = Coalescer(served, max_batch=2, max_in_flight=2)
    tasks = await _one_per_tick(coalescer, [1, 2, 3, 4, 5])
    assert served.batches == [[1], [2]]
    served.release.set()
    assert await asyncio.gather(*tasks) == [10, 20, 30, 40, 50]
    assert served.batches == [[1], [2], [3, 4], [5]]


async def test_a_held_caller_that_leaves_is_not_sent_and_a_failed_call_frees_its_slot() -> None:
    served = _Served()
    coalescer: Coalescer[int, int] = Coalescer(served, max_in_flight=1)
    failing, leaving, staying = await _one_per_tick(coalescer, [0, 7, 8])
    leaving.cancel()
    served.release.set()
    with pytest.raises(ValueError, match="a bad batch"):
        await failing
    assert await staying == 80
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert served.batches == [[0], [8]]
