"""Background loops that never die: each failing step is logged, counted and retried."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from notifyhub.metrics import Metrics

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0


class Loop:
    """Run `step` every `interval_s` (or after `pause_s()`); on failure log, count, back
    off and go on.

    The pause after a failure doubles from `interval_s` up to `MAX_BACKOFF_S` (or the
    interval, if longer) and returns to `interval_s` after the next success.
    """

    def __init__(
        self,
        name: str,
        interval_s: float,
        step: Callable[[], Awaitable[object]],
        metrics: Metrics,
        *,
        pause_s: Callable[[], float] | None = None,
        nudge: asyncio.Event | None = None,
        readiness: bool = True,
    ) -> None:
        self.name = name
        self.readiness = readiness
        """Whether `/readyz` fails when this loop is stuck: false for the loops of
        periodic producers, whose failures are the implementer's SQL on their own
        database (logged and counted like every loop's), not the hub's."""
        self.interval_s = interval_s
        self.step = step
        self.pause_s = pause_s or (lambda: self.interval_s)
        """The pause after a successful step (a step may plan its next one)."""
        self.metrics = metrics
        self.started_at = time.monotonic()
        self.last_success: float | None = None
        """`time.monotonic()` of the last step that returned normally."""
        self._stopping = asyncio.Event()
        self._nudged = nudge if nudge is not None else asyncio.Event()
        """Ends the current pause early: set by `wake`, `stop` and whoever else was given
        it as `nudge` (a loop's work arriving from a part made before the loop)."""

    def wake(self) -> None:
        """Run the next step now instead of at the end of the pause (work has arrived)."""
        self._nudged.set()

    def stop(self) -> None:
        """Ask the loop to end after its current step (cooperative, unlike cancel)."""
        self._stopping.set()
        self._nudged.set()

    async def run(self) -> None:
        self.started_at = time.monotonic()
        failures = 0
        while not self._stopping.is_set():
            try:
                await self.step()
            except Exception:
                failures += 1
                pause_s = self._backoff_s(failures)
                log.exception("loop %s failed; retrying in %.2fs", self.name, pause_s)
                self.metrics.loop_errors_total.labels(loop=self.name).inc()
                await self._pause(pause_s, self._stopping)  # backing off: not woken early
                continue
            failures = 0
            self._succeeded()
            await self._pause(self.pause_s(), self._nudged)
            self._nudged.clear()

    def _backoff_s(self, failures: int) -> float:
        cap_s = max(MAX_BACKOFF_S, self.interval_s)
        return min(self.interval_s * 2.0 ** min(failures, 32), cap_s)

    def _succeeded(self) -> None:
        self.last_success = time.monotonic()
        self.metrics.loop_last_success_timestamp_seconds.labels(loop=self.name).set(time.time())

    @staticmethod
    async def _pause(seconds: float, until: asyncio.Event) -> None:
        """Sleep `seconds`, or less if `until` is set meanwhile."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await until.wait()

    def age_s(self) -> float:
        """Seconds since the last success (or since start, before the first one)."""
        return time.monotonic() - (self.last_success or self.started_at)


class Runner:
    """Owns one task per loop; `stop()` cancels and awaits them all."""

    def __init__(self) -> None:
        self._loops: list[Loop] = []
        self._tasks: list[asyncio.Task[None]] = []

    def add(self, loop: Loop) -> None:
        self._loops.append(loop)

    def loop(self, name: str) -> Loop:
        return next(loop for loop in self._loops if loop.name == name)

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(loop.run(), name=f"loop-{loop.name}") for loop in self._loops
        ]

    async def stop(self) -> None:
        """Stop every loop: ask, cancel, and cancel again if a library swallowed it."""
        for loop in self._loops:
            loop.stop()
        pending = set(self._tasks)
        while pending:
            for task in pending:
                task.cancel()
            _done, pending = await asyncio.wait(pending, timeout=1.0)
        for task in self._tasks:
            if not task.cancelled() and task.exception() is not None:
                log.error("loop task %s ended with %r", task.get_name(), task.exception())
        self._tasks = []

    def stuck(self, after_s: float) -> list[str]:
        """Loops with no success for `after_s` beyond their own interval (for `/readyz`;
        loops made with `readiness=False` never are).

        A loop that never succeeded is measured from its start. The interval (or the
        pause a loop planned, if longer) is added so that a loop which runs every ten
        minutes is not "stuck" between two healthy runs.
        """
        return [
            loop.name
            for loop in self._loops
            if loop.readiness and loop.age_s() > after_s + max(loop.interval_s, loop.pause_s())
        ]
