"""Builder for escalation: the service publishes schedule steps through, and the worker
that runs them when due (services/escalation.py)."""

from __future__ import annotations

from dataclasses import dataclass

from notifyhub.db.unit import units
from notifyhub.features.clients import Database, RedisClients
from notifyhub.features.outbox import Outbox
from notifyhub.metrics import Metrics
from notifyhub.services.escalation import EscalationRunner, Escalations
from notifyhub.services.escalation_sends import StepSender
from notifyhub.services.ingest import IngestService
from notifyhub.settings import Settings
from notifyhub.store.escalation import EscalationCheck
from notifyhub.store.traces import RoutingTraces
from notifyhub.workers.escalation import EscalationWorker, escalation_loop
from notifyhub.workers.runner import Loop


@dataclass(frozen=True, slots=True)
class Escalation:
    service: Escalations
    worker: EscalationWorker
    loops: tuple[Loop, ...]


def escalation(
    settings: Settings,
    clients: RedisClients,
    database: Database,
    outbox: Outbox,
    ingest: IngestService,
    traces: RoutingTraces,
    metrics: Metrics,
) -> Escalation:
    """`ingest` schedules publishes' steps through the service; the loop runs them, its
    sends added through `outbox.rows` (sent at once, or when quiet hours end)."""
    service = Escalations()
    ingest.escalate_with(service)
    check = EscalationCheck(clients.redis, clients.keys, settings.limits.change_log_max)
    runner = EscalationRunner(check, StepSender(outbox.rows), traces, service.defaults)
    worker = EscalationWorker(units(database.sessionmaker), runner)
    return Escalation(service, worker, (escalation_loop(worker, metrics),))
