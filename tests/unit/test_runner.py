"""Background loops never die, and report when they stop making progress."""

from __future__ import annotations

import asyncio

from notifyhub.metrics import Metrics
from notifyhub.workers.runner import Loop, Runner


async def test_loop_survives_failures_and_records_success() -> None:
    calls = 0

    async def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise RuntimeError("transient")

    metrics = Metrics()
    loop = Loop("flaky", 0.01, flaky, metrics)
    runner = Runner()
    runner.add(loop)
    await runner.start()
    async with asyncio.timeout(5):
        while loop.last_success is None:
            await asyncio.sleep(0.01)
    await runner.stop()
    assert calls >= 3
    assert metrics.loop_errors_total.labels(loop="flaky")._value.get() == 2
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "loop-flaky"]


async def test_stuck_loop_is_reported() -> None:
    blocked = asyncio.Event()

    async def hangs() -> None:
        await blocked.wait()

    async def fine() -> None:
        return None

    runner = Runner()
    runner.add(Loop("hangs", 0.01, hangs, Metrics()))
    runner.add(Loop("fine", 0.01, fine, Metrics()))
    await runner.start()
    await asyncio.sleep(0.2)
    assert runner.stuck(after_s=0.1) == ["hangs"]
    await runner.stop()
