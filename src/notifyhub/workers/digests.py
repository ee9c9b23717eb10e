"""The digest worker: sends the digests whose window closed (services/digests.py), each
as one delivery per channel, closing it in the same transaction."""

from __future__ import annotations

from notifyhub.db.unit import Units
from notifyhub.metrics import Metrics
from notifyhub.services.digests import BATCH, DigestSender
from notifyhub.settings import DeliverySettings
from notifyhub.workers.runner import Loop

MAX_BATCHES = 20
"""Transactions one pass runs at most (BATCH digests each)."""


class DigestWorker:
    """One pass (`run_once`) sends due digests, BATCH per transaction, until none is due
    (or MAX_BATCHES): a crash loses at most the transaction in flight, whose digests stay
    due for the next pass; two workers skip each other's locked digests."""

    def __init__(self, units: Units, sender: DigestSender) -> None:
        self._units = units
        self._sender = sender

    async def run_once(self) -> int:
        """Send what is due; the number of digests closed."""
        closed = 0
        for _ in range(MAX_BATCHES):
            async with self._units() as unit:
                flushed = await self._sender.send_due(unit)
            closed += flushed.closed
            if flushed.closed < BATCH:
                break
        return closed


def digest_loop(worker: DigestWorker, settings: DeliverySettings, metrics: Metrics) -> Loop:
    return Loop("digests", settings.digest_interval_s, worker.run_once, metrics)
