"""Prometheus metrics, in a registry of their own per app (tests build many apps)."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.http_requests_total = Counter(
            "http_requests_total", "HTTP requests", ["method", "route", "status"], registry=r
        )
        self.http_request_duration_seconds = Histogram(
            "http_request_duration_seconds", "HTTP request time", ["method", "route"], registry=r
        )
        self.notifications_ingested_total = Counter(
            "notifications_ingested_total", "Notifications accepted", registry=r
        )
        self.notification_copies_total = Counter(
            "notification_copies_total", "Per-recipient copies written", registry=r
        )
        self.streams_open = Gauge("streams_open", "Open SSE streams", registry=r)
        self.stream_events_sent_total = Counter(
            "stream_events_sent_total", "SSE events sent", ["type"], registry=r
        )
        self.streams_dropped_total = Counter(
            "streams_dropped_total", "Streams refused or closed by the hub", ["reason"], registry=r
        )
        self.pubsub_reconnects_total = Counter(
            "pubsub_reconnects_total", "Pub/Sub reconnections", registry=r
        )
        self.cleaner_runs_total = Counter("cleaner_runs_total", "Cleaner passes", registry=r)
        self.cleaner_purged_total = Counter(
            "cleaner_purged_total", "Expired copies removed by the cleaner", registry=r
        )
        self.loop_last_success_timestamp_seconds = Gauge(
            "loop_last_success_timestamp_seconds", "Last successful tick", ["loop"], registry=r
        )
        self.delayed_backlog = Gauge(
            "delayed_backlog", "Delayed messages not yet due, per set", ["set"], registry=r
        )
        self.delayed_oldest_due_age_seconds = Gauge(
            "delayed_oldest_due_age_seconds",
            "How late the oldest due, unmoved message is",
            registry=r,
        )
        self.delayed_moved_total = Counter(
            "delayed_moved_total", "Delayed messages moved to ready", registry=r
        )
        self.loop_errors_total = Counter(
            "loop_errors_total", "Background loop failures", ["loop"], registry=r
        )

    def observe_delayed(
        self, backlog_by_set: dict[int, int], oldest_due_age_s: float, moved: int
    ) -> None:
        for index, backlog in backlog_by_set.items():
            self.delayed_backlog.labels(set=str(index)).set(backlog)
        self.delayed_oldest_due_age_seconds.set(oldest_due_age_s)
        self.delayed_moved_total.inc(moved)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
