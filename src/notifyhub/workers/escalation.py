"""The escalation worker: runs due escalation steps (services/escalation.py)."""

from __future__ import annotations

from notifyhub.metrics import Metrics
from notifyhub.services.escalation import EscalationRunner
from notifyhub.workers.runner import Loop

INTERVAL_S = 0.25
"""How often it looks for due steps: one indexed query, so a step runs within about a
quarter second of its time (the issue asks for 1 s)."""


def escalation_loop(runner: EscalationRunner, metrics: Metrics) -> Loop:
    return Loop("escalations", INTERVAL_S, runner.run_once, metrics)
