"""The channel worker: expands channel sends (a notification's e-mails and Web Pushes)
into outbox deliveries, a chunk of users per transaction (services/channels.py)."""

from __future__ import annotations

import logging

from redis.exceptions import RedisError

from notifyhub.db.unit import Units
from notifyhub.metrics import Metrics
from notifyhub.services.channels import ChannelExpander
from notifyhub.settings import DeliverySettings
from notifyhub.store.traces import RoutingTraces
from notifyhub.workers.runner import Loop

log = logging.getLogger(__name__)

MAX_CHUNKS = 20
"""Chunks one pass expands at most (the loop runs again at once when woken)."""


class ChannelWorker:
    """One pass (`run_once`) expands up to MAX_CHUNKS chunks of open sends, each in its
    own transaction (a crash loses at most the chunk in flight, which the next pass
    expands again: its deliveries' ids make that add nothing twice); each chunk's
    outcomes go into the notification's routing trace after its commit."""

    def __init__(
        self, units: Units, expander: ChannelExpander, traces: RoutingTraces | None = None
    ) -> None:
        self._units = units
        self._expander = expander
        self._traces = traces

    async def run_once(self) -> int:
        """Expand what is open, chunk by chunk; the number of deliveries added."""
        added = 0
        for _ in range(MAX_CHUNKS):
            async with self._units() as unit:
                expanded = await self._expander.expand_next(unit)
            if expanded is None:
                break
            send, expansion, start = expanded
            if expansion is None:  # failed and postponed (logged): the next send
                continue
            added += expansion.added
            await self._trace(send.id, expansion.outcomes, start)
        return added

    async def _trace(self, send_id: str, outcomes: dict[str, dict[str, str]], start: int) -> None:
        """The chunk's outcomes in the trace; a failure is logged (the deliveries are
        committed: the trace only explains them)."""
        if self._traces is None:
            return
        try:
            await self._traces.channels_sent(send_id, outcomes, start=start)
        except RedisError as exc:
            log.warning("channel outcomes of %s not traced: %s", send_id, exc)


def channel_loop(worker: ChannelWorker, settings: DeliverySettings, metrics: Metrics) -> Loop:
    return Loop("channels", settings.channel_interval_s, worker.run_once, metrics)
