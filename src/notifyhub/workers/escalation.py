"""The escalation worker: runs due escalation steps (services/escalation.py), a batch
per transaction, and sleeps until the next one falls due."""

from __future__ import annotations

import logging
from datetime import datetime

from notifyhub.db.unit import Units
from notifyhub.metrics import Metrics
from notifyhub.services.escalation import BATCH, EscalationRunner
from notifyhub.workers.runner import Loop

log = logging.getLogger(__name__)

INTERVAL_S = 0.25
"""The longest pause between passes. A step is at least 1 s after its notification, so a
pass sees every step before it falls due (one published through another process too),
and plans the next pass for the earliest one."""
MIN_PAUSE_S = 0.02
"""The shortest pause: a step already due that a pass did not run is held by another
process's pass (skipped, locked), or was just postponed."""
WAKE_MARGIN_S = 0.005
"""Past the due time, so that a timer that fires a little early finds the step due."""


class EscalationWorker:
    """One pass (`run_once`) runs batches until none is full; a batch's decisions and
    deliveries commit together (a crash rolls the batch back: its steps run again, once),
    then their outcomes go into the routing traces. The last batch's transaction reads
    when the earliest pending step falls due: the loop sleeps until then (`pause_s`)."""

    def __init__(self, units: Units, runner: EscalationRunner) -> None:
        self._units = units
        self._runner = runner
        self._next_due: datetime | None = None

    async def run_once(self) -> int:
        """Run what is due; how many steps ran (sent, cancelled or skipped)."""
        defaults = self._runner.defaults
        if defaults is not None and defaults.stale():
            async with self._units() as unit:
                await defaults.reload(unit.session)
        total = 0
        while True:
            async with self._units() as unit:
                claimed, ran = await self._runner.run_due(unit)
                if claimed < BATCH:
                    self._next_due = await self._runner.next_due(unit)
            await self._runner.trace(ran)
            total += len(ran)
            if claimed < BATCH:
                return total

    def pause_s(self) -> float:
        return pause_until(self._next_due, self._runner.now())


def pause_until(next_due: datetime | None, now: datetime) -> float:
    """The loop's pause: until the earliest pending step is due (and WAKE_MARGIN_S),
    between MIN_PAUSE_S and INTERVAL_S."""
    if next_due is None:
        return INTERVAL_S
    wait_s = (next_due - now).total_seconds() + WAKE_MARGIN_S
    return min(max(wait_s, MIN_PAUSE_S), INTERVAL_S)


def escalation_loop(worker: EscalationWorker, metrics: Metrics) -> Loop:
    return Loop("escalations", INTERVAL_S, worker.run_once, metrics, pause_s=worker.pause_s)
