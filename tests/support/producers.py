"""A periodic producer bound to a test hub's own parts, run by hand (`run_once`)."""

from __future__ import annotations

from typing import Any

from notifyhub.workers.producers import Producer, ProducerConfig


def hub_producer(hub: Any, config: ProducerConfig, *, durable: bool = False) -> Producer:
    """`durable`: its dedupe claims in PostgreSQL (durable inbox mode)."""
    state = hub.app_state
    return Producer(
        config,
        ingest=state["ingest"],
        sessionmaker=state["sessionmaker"],
        redis=state["redis"],
        keys=state["store"]._keys,
        lock_ttl_ms=5000,
        durable=durable,
    )
