"""Prometheus metrics of reliable deliveries, registered in the app's own registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from notifyhub.domain.delivery import DeliveryStatus


class DeliveryMetrics:
    """Deliveries by status, attempt latency, oldest pending age, alerts sent, failed and
    given up."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.deliveries = Gauge(
            "notifyhub_deliveries",
            "Deliveries in the outbox by status",
            ["status"],
            registry=registry,
        )
        self.settled_total = Counter(
            "notifyhub_delivery_attempts_settled_total",
            "Attempts settled, by the status they left the delivery in",
            ["status"],
            registry=registry,
        )
        self.attempt_seconds = Histogram(
            "notifyhub_delivery_attempt_duration_seconds",
            "Time of one outbound webhook attempt",
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.oldest_pending_age_seconds = Gauge(
            "notifyhub_deliveries_oldest_pending_age_seconds",
            "Age of the oldest due delivery nobody has claimed",
            registry=registry,
        )
        self.alerts_sent_total = Counter(
            "notifyhub_delivery_alerts_sent_total", "Alerts sent", ["channel"], registry=registry
        )
        self.alerts_failed_total = Counter(
            "notifyhub_delivery_alerts_failed_total",
            "Tries to send an alert that failed (each is tried again later, or given up)",
            ["channel"],
            registry=registry,
        )
        self.alerts_given_up_total = Counter(
            "notifyhub_delivery_alerts_given_up_total",
            "Alerts never sent: out of tries, or their definition was deleted",
            ["channel"],
            registry=registry,
        )
        self.inline_overflow_total = Counter(
            "notifyhub_delivery_inline_overflow_total",
            "At-once sends left to the dispatcher because the inline queue was full",
            registry=registry,
        )

    def observe_counts(self, by_status: dict[str, int], oldest_age_s: float) -> None:
        for status in DeliveryStatus:
            self.deliveries.labels(status=status.value).set(by_status.get(status.value, 0))
        self.oldest_pending_age_seconds.set(oldest_age_s)
