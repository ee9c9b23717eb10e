"""The outbox dispatcher: retries what is due, sends owed alerts, archives old deliveries.

No lock: every step is a `FOR UPDATE SKIP LOCKED` claim plus a fenced settlement, so any
number of hubs may run it at once. A hub killed mid-send leaves its claim to expire after
the lease; the next claim re-sends with the same `webhook-id`.
"""

from __future__ import annotations

import time

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.repositories import deliveries as repo
from notifyhub.db.unit import UnitOfWork
from notifyhub.delivery_metrics import DeliveryMetrics
from notifyhub.metrics import Metrics
from notifyhub.services.alerts import AlertSender
from notifyhub.services.sender import DeliverySender
from notifyhub.settings import DeliverySettings
from notifyhub.workers.runner import Loop

HOUSEKEEPING_S = 1.0
"""Alerts, archiving and gauges at most this often; retries every tick."""


class Dispatcher:
    def __init__(
        self,
        sender: DeliverySender,
        alerts: AlertSender,
        sessionmaker: async_sessionmaker[AsyncSession],
        settings: DeliverySettings,
        metrics: DeliveryMetrics,
    ) -> None:
        self._sender = sender
        self._alerts = alerts
        self._sessionmaker = sessionmaker
        self._settings = settings
        self._metrics = metrics
        self._housekept_at = 0.0

    async def run_once(self) -> int:
        """One tick: attempt every due delivery (`drain_due`), then housekeeping."""
        attempted = await self._sender.drain_due(self._settings.batch)
        await self._alerts.run_once()
        if time.monotonic() - self._housekept_at >= HOUSEKEEPING_S:
            await self.housekeeping()
        return attempted

    async def housekeeping(self) -> int:
        """Archive finished deliveries past their age; refresh the gauges."""
        self._housekept_at = time.monotonic()
        async with UnitOfWork(self._sessionmaker) as unit:
            session = unit.session
            moved = await repo.move_to_history(
                session, self._settings.history_after_s, self._settings.history_batch
            )
            by_status, oldest_s = await repo.counts(session)
        self._metrics.observe_counts(by_status, oldest_s)
        return moved


def dispatcher_loop(dispatcher: Dispatcher, settings: DeliverySettings, metrics: Metrics) -> Loop:
    return Loop(
        "deliveries-dispatcher", settings.dispatcher_interval_s, dispatcher.run_once, metrics
    )
