"""The escalation worker: runs due escalation steps (services/escalation.py), a batch
per transaction."""

from __future__ import annotations

import logging

from notifyhub.db.unit import Units
from notifyhub.metrics import Metrics
from notifyhub.services.escalation import BATCH, EscalationRunner
from notifyhub.workers.runner import Loop

log = logging.getLogger(__name__)

INTERVAL_S = 0.25
"""How often it looks for due steps: one indexed query, so a step runs within about a
quarter second of its time (the issue asks for 1 s)."""


class EscalationWorker:
    """One pass (`run_once`) runs batches until none is full; a batch's decisions and
    deliveries commit together (a crash rolls the batch back: its steps run again, once),
    then their outcomes go into the routing traces."""

    def __init__(self, units: Units, runner: EscalationRunner) -> None:
        self._units = units
        self._runner = runner

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
            await self._runner.trace(ran)
            total += len(ran)
            if claimed < BATCH:
                return total


def escalation_loop(worker: EscalationWorker, metrics: Metrics) -> Loop:
    return Loop("escalations", INTERVAL_S, worker.run_once, metrics)
