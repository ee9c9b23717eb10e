"""Routing traces: per notification, what routing decided for each recipient and why."""

from __future__ import annotations

from notifyhub.store.traces.model import Outcome, Route, RoutingTrace, Sources, TraceLine
from notifyhub.store.traces.tally import FLUSH_S, StreamedTally
from notifyhub.store.traces.writer import RoutingTraces

__all__ = [
    "FLUSH_S",
    "Outcome",
    "Route",
    "RoutingTrace",
    "RoutingTraces",
    "Sources",
    "StreamedTally",
    "TraceLine",
]
