"""Prometheus metrics, in a registry of their own per app (tests build many apps)."""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric

GC_PAUSES = Histogram(
    "notifyhub_gc_pause_seconds",
    "Cyclic garbage collector pauses, by the oldest generation collected (the process "
    "stops meanwhile; timed once `notifyhub serve` installed its policy, process/gc.py)",
    ["generation"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
    registry=None,
)
GC_FROZEN = Gauge(
    "notifyhub_gc_frozen_objects",
    "Objects frozen out of the garbage collector's scans: counted exactly at start-up and "
    "at each thaw, and as they are frozen in between (frozen objects freed meanwhile "
    "are subtracted at the next thaw; process/gc.py)",
    registry=None,
)
"""The collector is the process's: these two are shared by every app's registry."""


class StreamEnd(StrEnum):
    """Why a stream was refused or ended: the `reason` of `notifyhub_streams_dropped_total`."""

    CAP = "cap"
    """Refused: the user already has `limits.streams_per_user` streams here."""
    SEND_TIMEOUT = "send_timeout"
    """Its client took no frame for `stream.send_timeout_s`."""
    REDIS_ERROR = "redis_error"
    """A read of its change log failed (the client resumes with `Last-Event-ID`)."""
    CLIENT_LEFT = "client_left"
    SHUTDOWN = "shutdown"
    ERROR = "error"
    """A bug (logged)."""


class DoorbellsHeard:
    """The doorbell bytes and lines this process heard, and the share for its own streams.

    Plain integers added once per doorbell message (the Pub/Sub reader's hot path: four
    additions, where four `Counter.inc` took 1.5 us a message), exported as counters when
    scraped: `notifyhub_doorbell_bytes_total{local}` (local="true": a message's lines
    naming a user with a stream here, with its notification or trace header when any
    did; "false": the rest, revocations included) and `notifyhub_doorbell_lines_total
    {local}`. Bytes read over bytes for local streams is how much more than its own share
    a process reads (docs/scaling.md, "Doorbell fan-in")."""

    __slots__ = ("local_bytes", "local_lines", "other_bytes", "other_lines")

    def __init__(self) -> None:
        self.local_bytes = self.other_bytes = self.local_lines = self.other_lines = 0

    def read(self, size: int, local_bytes: int, lines: int, local_lines: int) -> None:
        """Count one message of `size` bytes and `lines` lines, of which `local_lines`
        (`local_bytes` with its header) were for this process's streams."""
        self.local_bytes += local_bytes
        self.other_bytes += size - local_bytes
        self.local_lines += local_lines
        self.other_lines += lines - local_lines

    def collect(self) -> Iterator[Metric]:
        for name, text, local, other in (
            ("bytes", "Doorbell bytes", self.local_bytes, self.other_bytes),
            ("lines", "Doorbell lines", self.local_lines, self.other_lines),
        ):
            family = CounterMetricFamily(
                f"notifyhub_doorbell_{name}",
                f"{text} this process received; local=true: those for its own streams",
                labels=["local"],
            )
            family.add_metric(["true"], local)
            family.add_metric(["false"], other)
            yield family


class Metrics:
    """Every metric the hub exports, registered in this instance's own registry.

    Never the global registry: several apps may live in one process (tests), and each
    must count only its own traffic.
    """

    registry: CollectorRegistry
    http_requests_total: Counter
    """Labels: method, route (the route template, never the raw path), status."""
    http_request_duration_seconds: Histogram
    http_unavailable_total: Counter
    """503s answered because a store was down. Label: dependency (redis, postgres)."""
    notifications_ingested_total: Counter
    notification_copies_total: Counter
    """Recipient copies written (a notification to N users counts N)."""
    fanouts_resumed_total: Counter
    """Deferred fan-outs taken over from a holder that stopped (services/fanouts.py)."""
    fanouts_stopped_total: Counter
    """Deferred fan-outs this process stopped placing on an error (another resumes them)."""
    notifications_evicted_total: Counter
    """Oldest notifications dropped because an inbox reached `limits.items_per_user`."""
    streams_open: Gauge
    stream_events_sent_total: Counter
    """Label: type (notification, update, delete, counts, reset)."""
    streams_dropped_total: Counter
    """Label: reason, a `StreamEnd` (every stream is counted once, when it ends)."""
    pubsub_reconnects_total: Counter
    doorbells_heard: DoorbellsHeard
    """`notifyhub_doorbell_{bytes,lines}_total{local}`."""
    cleaner_runs_total: Counter
    cleaner_purged_total: Counter
    loop_last_success_timestamp_seconds: Gauge
    loop_errors_total: Counter
    delayed_backlog: Gauge
    """Label: set (the delayed set's index). Messages still waiting to be moved to ready."""
    delayed_oldest_due_age_seconds: Gauge
    delayed_moved_total: Counter
    delayed_removed_total: Counter
    """Finished delayed messages removed by the retention sweep (`delayed.retention_s`)."""
    redis_data_loss_total: Counter
    """Label: sign (marker_missing, marker_changed, restarted): Redis lost (or may have
    lost) data, as the epoch watch saw it (services/caches.py)."""
    redis_rebuilds_total: Counter
    """Rebuilds of Redis state from PostgreSQL that completed (label: outcome ok/error)."""
    streams_reset_total: Counter
    """Label: reason (epoch, ahead, gap): streams told to reload (realtime/sse.py)."""
    view_recompute_users_total: Counter
    view_recompute_pending_users: Gauge
    view_recompute_errors_total: Counter

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        r.register(GC_PAUSES)
        r.register(GC_FROZEN)
        self.http_requests_total = Counter(
            "notifyhub_http_requests_total",
            "HTTP requests",
            ["method", "route", "status"],
            registry=r,
        )
        self.http_request_duration_seconds = Histogram(
            "notifyhub_http_request_duration_seconds",
            "HTTP request time",
            ["method", "route"],
            registry=r,
        )
        self._requests: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self.http_unavailable_total = Counter(
            "notifyhub_http_unavailable_total",
            "503 answers because a backing store was unavailable",
            ["dependency"],
            registry=r,
        )
        self.notifications_ingested_total = Counter(
            "notifyhub_notifications_ingested_total", "Notifications accepted", registry=r
        )
        self.notifications_evicted_total = Counter(
            "notifyhub_notifications_evicted_total",
            "Oldest notifications dropped from full inboxes (limits.items_per_user)",
            registry=r,
        )
        self.notification_copies_total = Counter(
            "notifyhub_notification_copies_total", "Per-recipient copies written", registry=r
        )
        self.fanouts_resumed_total = Counter(
            "notifyhub_fanouts_resumed_total",
            "Deferred fan-outs taken over from a process that stopped placing them",
            registry=r,
        )
        self.fanouts_stopped_total = Counter(
            "notifyhub_fanouts_stopped_total",
            "Deferred fan-outs this process stopped placing on an error (resumed later)",
            registry=r,
        )
        self.view_recompute_users_total = Counter(
            "notifyhub_view_recompute_users_total",
            "Users whose view counts a sweep recomputed after their tenant's views changed",
            registry=r,
        )
        self.view_recompute_pending_users = Gauge(
            "notifyhub_view_recompute_pending_users",
            "Users a running sweep found and has not recomputed yet (their tenant views' "
            "counts are `exact: false` meanwhile)",
            registry=r,
        )
        self.view_recompute_errors_total = Counter(
            "notifyhub_view_recompute_errors_total",
            "Sweeps of a tenant's users that stopped on an error (those left sync on their "
            "next read)",
            registry=r,
        )
        self.streams_open = Gauge("notifyhub_streams_open", "Open SSE streams", registry=r)
        self.publish_to_stream_seconds = Histogram(
            "notifyhub_publish_to_stream_seconds",
            "From a notification's acceptance (its id's time) to its events being handed to "
            "this process's streams; one observation per doorbell message that carried the "
            "notification to at least one local stream",
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0),
            registry=r,
        )
        self.stream_events_sent_total = Counter(
            "notifyhub_stream_events_sent_total", "SSE events sent", ["type"], registry=r
        )
        self.streams_dropped_total = Counter(
            "notifyhub_streams_dropped_total",
            "Streams refused or ended, by reason (send_timeout, redis_error, client_left, ...)",
            ["reason"],
            registry=r,
        )
        self._stream_ends = {
            reason: self.streams_dropped_total.labels(reason=reason.value) for reason in StreamEnd
        }
        self.pubsub_reconnects_total = Counter(
            "notifyhub_pubsub_reconnects_total", "Pub/Sub reconnections", registry=r
        )
        self.doorbells_heard = DoorbellsHeard()
        r.register(self.doorbells_heard)
        self.cleaner_runs_total = Counter(
            "notifyhub_cleaner_runs_total", "Cleaner passes", registry=r
        )
        self.cleaner_purged_total = Counter(
            "notifyhub_cleaner_purged_total", "Expired copies removed by the cleaner", registry=r
        )
        self.loop_last_success_timestamp_seconds = Gauge(
            "notifyhub_loop_last_success_timestamp_seconds",
            "Last successful tick",
            ["loop"],
            registry=r,
        )
        self.loop_errors_total = Counter(
            "notifyhub_loop_errors_total", "Background loop failures", ["loop"], registry=r
        )
        self.delayed_backlog = Gauge(
            "notifyhub_delayed_backlog",
            "Messages still waiting in the delayed set (due or not)",
            ["set"],
            registry=r,
        )
        self.delayed_oldest_due_age_seconds = Gauge(
            "notifyhub_delayed_oldest_due_age_seconds",
            "Age of the oldest due, unmoved message",
            registry=r,
        )
        self.delayed_moved_total = Counter(
            "notifyhub_delayed_moved_total", "Delayed messages moved to ready", registry=r
        )
        self.delayed_removed_total = Counter(
            "notifyhub_delayed_removed_total",
            "Finished delayed messages removed after their retention",
            registry=r,
        )
        self.redis_data_loss_total = Counter(
            "notifyhub_redis_data_loss_total", "Redis data losses detected", ["sign"], registry=r
        )
        self.redis_rebuilds_total = Counter(
            "notifyhub_redis_rebuilds_total",
            "Rebuilds of Redis state from PostgreSQL",
            ["outcome"],
            registry=r,
        )
        self.streams_reset_total = Counter(
            "notifyhub_streams_reset_total", "Streams sent a reset", ["reason"], registry=r
        )

    def requests(self, method: str, route: str, status: int) -> tuple[Counter, Histogram]:
        """The request counter and duration histogram of these labels, looked up once
        (as many entries as the metrics have label sets)."""
        found = self._requests.get((method, route, status))
        if found is None:
            found = (
                self.http_requests_total.labels(method, route, str(status)),
                self.http_request_duration_seconds.labels(method, route),
            )
            self._requests[(method, route, status)] = found
        return found

    def observe_delayed(self, backlog: dict[int, int], oldest_due_age_s: float, moved: int) -> None:
        """Record one delayed-mover tick: backlog per set, oldest due age, messages moved."""
        for index, count in backlog.items():
            self.delayed_backlog.labels(set=str(index)).set(count)
        self.delayed_oldest_due_age_seconds.set(oldest_due_age_s)
        self.delayed_moved_total.inc(moved)

    def stream_ended(self, reason: StreamEnd) -> None:
        """Count a stream refused or ended (`notifyhub_streams_dropped_total{reason}`)."""
        self._stream_ends[reason].inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition body and its content type, for `GET /metrics`."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
