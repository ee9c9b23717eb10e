"""The one settings model: built once by the composition root, then passed down."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

JwtAlgorithm = Literal["HS256", "RS256", "ES256"]
InboxDurability = Literal["redis", "postgres"]


class Limits(BaseModel):
    """Bounds on what one request or one connection may cost."""

    max_body_bytes: int = Field(1024 * 1024, ge=1024)
    max_recipients: int = Field(200_000, ge=1)
    fanout_batch: int = Field(500, ge=1, le=10_000)
    defer_fanout_at: int = Field(20_000, ge=0)
    """A fan-out to at least this many users leaves each copy pending (one list push per
    user), which the user's next read or change makes a copy first (store/inbox/placing.py
    place), written after the 202 (services/fanouts.py); an inlinable one is announced by
    the processes holding its recipients' streams (store/inbox/announcing.py
    `announce_deferred`); 0: never."""
    announce_at: int = Field(1000, ge=0)
    """A fan-out of an inlinable notification (no category, collapse key or thread) to at
    least this many users, and fewer than `defer_fanout_at`, is announced to their streams
    before its copies are written, so a broadcast's streams do not wait for every copy
    (store/inbox/announcing.py); 0: never."""
    defer_batch: int = Field(500, ge=1, le=20_000)
    """Users per batch (one Lua call) of a deferred fan-out's placement after its 202:
    each batch holds Redis and the hub's loop for its users, and between two batches the
    placement takes turns with other work (`defer_pause_ms`), so smaller batches keep
    others' latency (the bench's starvation row: 500 against 2,000, docs/scaling.md) at
    the price of more round trips on an idle hub."""
    defer_pause_ms: int = Field(10, ge=0, le=1000)
    """A deferred fan-out's copies are written after its 202, batch by batch; the pause
    after a batch when other work waited for the hub meanwhile, in which everyone else's
    requests have Redis and the hub to themselves (services/fanouts.py). Its POST's
    recipient index rests as long between its slices (store/inbox/announcing.py);
    0: none."""
    streams_per_user: int = Field(10, ge=1)
    change_log_max: int = Field(1000, ge=10)
    stream_read_bytes: int = Field(32 * 1024, ge=1024)
    """A stream's read of its change log stops at about this many bytes (at least one
    entry): bounds a pipeline of stream reads (`ChangeReader`, up to 500 of them) and what
    one write to a client that stopped reading leaves in its connection's buffer."""
    list_scan_budget: int = Field(2000, ge=100)
    items_per_user: int = Field(10_000, ge=0)
    """Notifications one inbox keeps; a delivery past it drops the oldest (0: no cap)."""
    pinned_per_user: int = Field(20, ge=0)
    """A user pins at most this many notifications (a 409 beyond)."""


class StreamSettings(BaseModel):
    """Server-Sent Event stream timing."""

    ping_s: float = Field(15.0, gt=0)
    retry_ms: int = Field(3000, ge=0)
    send_timeout_s: float = Field(10.0, gt=0)
    send_buffer_bytes: int = Field(64 * 1024, ge=0)
    """The kernel's send buffer of a stream's connection (SO_SNDBUF, which Linux doubles)
    instead of the auto-tuned one, which grows to MiBs: with the transport's 64 KiB, what a
    client that stops reading holds before its stream waits for it (and ends after
    `send_timeout_s`), so a stuck client costs the hub no more reads and writes than that.
    0 keeps the kernel's."""
    token_ttl_s: int = Field(60, ge=5, le=3600)
    shutdown_grace_s: float = Field(2.0, ge=0)
    presence_interval_s: float = Field(5.0, gt=0, le=300)
    """How often each process reports its open streams per user to Redis (the admin user
    lookup's `streams_open` is at most this old; a dead process counts for 3 times it)."""

    @model_validator(mode="before")
    @classmethod
    def _gc_moved(cls, data: object) -> object:
        moved = [k for k in data if str(k).startswith("gc_")] if isinstance(data, dict) else []
        if moved:
            raise ValueError(
                f"stream.{moved[0]} moved to the gc group: set NOTIFYHUB_GC__"
                f"{moved[0].removeprefix('gc_').upper()} instead of NOTIFYHUB_STREAM__GC_..."
            )
        return data


class GcSettings(BaseModel):
    """The garbage-collector policy `notifyhub serve` installs (`process/gc.py`)."""

    young_threshold: int = Field(10_000, ge=0)
    """Collect the youngest generation after this many new objects, not Python's 700
    (0 keeps Python's default)."""
    freeze_survivors: bool = True
    """Freeze what survives a collection of the middle generation, so open streams are
    never scanned again (no full-collection pauses)."""
    thaw_interval_s: float = Field(3600.0, ge=0)
    """With `freeze_survivors`: thaw and collect the frozen objects this often, which
    reclaims reference cycles among long-lived objects (one full collection's pause); 0: never."""


class WorkerSettings(BaseModel):
    """Background loops run inside the hub process."""

    cleaner_interval_s: float = Field(5.0, gt=0)
    cleaner_batch: int = Field(200, ge=1)
    lock_ttl_ms: int = Field(30_000, ge=1000)
    stuck_after_s: float = Field(60.0, gt=0)
    epoch_check_interval_s: float = Field(1.0, gt=0)


RETENTION_MIN_S = 60.0
"""The shortest `delayed.retention_s` but 0: a message's transitions wait in its hub's
buffer (services/delayed.py `TransitionLog`, seconds at most while PostgreSQL answers)
before they are written, and the retention must not remove a message before them."""


class DelayedSettings(BaseModel):
    """The delayed queue: N sets keep each sorted set short; the mover's tick; how long
    finished messages are kept."""

    sets: int = Field(4, ge=1, le=1024)
    mover_interval_s: float = Field(0.02, gt=0)
    """The mover's tick while messages are moving."""
    mover_idle_s: float = Field(0.25, gt=0)
    """With nothing due, the mover sleeps until the earliest due instant it saw, at most
    this long: a push through this process wakes it sooner, a push through another is
    that process's mover's to move, and expired reservations are re-offered by then."""
    scheduled_poll_s: float = Field(1.0, gt=0)
    """How often the scheduled-notification consumer looks without being woken: the
    process whose mover makes one ready wakes its own consumer at once."""
    move_batch: int = Field(1000, ge=1)
    default_ttl_ms: int = Field(30_000, ge=100)
    log_flush_interval_s: float = Field(0.1, gt=0)
    retention_s: float = Field(7 * 86400.0, ge=0)
    """A finished message (consumed or cancelled) is removed this long after it finished:
    its state from Redis, its row and transitions from PostgreSQL. 0 keeps them forever;
    else at least RETENTION_MIN_S."""
    retention_batch: int = Field(500, ge=1, le=10_000)
    """Messages one retention pass removes (one transaction): a backlog goes in batches."""
    retention_interval_s: float = Field(60.0, gt=0)
    """The retention loop's pause after a pass that was not full (after a full one it
    passes again within a second)."""

    @model_validator(mode="after")
    def _retention_outlives_the_log(self) -> DelayedSettings:
        if 0 < self.retention_s < RETENTION_MIN_S:
            raise ValueError(
                f"delayed.retention_s must be 0 (keep forever) or at least {RETENTION_MIN_S:g}"
                " s: a shorter one could remove a message before its last transitions reach"
                " PostgreSQL, which would then keep them without their message"
            )
        return self


class DeliverySettings(BaseModel):
    """Reliable deliveries: the dispatcher, outbound HTTP limits, history, SMTP alerts."""

    dispatcher_interval_s: float = Field(0.2, gt=0)
    batch: int = Field(200, ge=1, le=10_000)
    lease_s: float = Field(120.0, ge=1)
    """How long a claimed attempt is owned; longer than any definition's timeout."""
    concurrency: int = Field(64, ge=1, le=1000)
    inline_queue: int = Field(10_000, ge=1)
    """Deliveries waiting for their at-once send; beyond it the dispatcher sends them."""
    jitter: float = Field(0.1, ge=0, le=0.5)
    channel_interval_s: float = Field(1.0, gt=0)
    """How often the channel worker looks for e-mail and Web Push sends to expand (a
    publish through this process wakes it at once)."""
    channel_chunk: int = Field(500, ge=1, le=10_000)
    """Users whose e-mails and pushes one channel-worker transaction expands."""
    digest_interval_s: float = Field(1.0, gt=0)
    """How often the digest worker looks for digests whose window closed (issue 41)."""
    response_cap_bytes: int = Field(64 * 1024, ge=1024)
    max_timeout_s: float = Field(60.0, gt=0)
    allow_networks: list[str] = []
    """CIDRs a target may resolve to even when private networks are not allowed."""
    history_after_s: float = Field(7 * 86400.0, ge=0)
    history_batch: int = Field(1000, ge=1)
    smtp_host: str = "127.0.0.1"
    smtp_port: int = Field(25, ge=1, le=65535)
    smtp_sender: str = "notifyhub@localhost"
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_starttls: bool = False
    smtp_tls: bool = False
    """Implicit TLS from the first byte (port 465); `smtp_starttls` upgrades instead."""
    smtp_timeout_s: float = Field(10.0, gt=0)
    alert_tries: int = Field(8, ge=1, le=100)
    """Tries to send one alert (e-mail or webhook) before it is given up: logged as an
    error and counted (`notifyhub_delivery_alerts_given_up_total`)."""
    alert_retry_s: float = Field(30.0, gt=0)
    """The wait after an alert's first failed try; each next one doubles, up to an hour
    (8 tries: about an hour in all)."""

    @model_validator(mode="after")
    def _lease_outlives_requests(self) -> DeliverySettings:
        if self.lease_s <= self.max_timeout_s:
            raise ValueError(
                "deliveries.lease_s must exceed deliveries.max_timeout_s, or a slow attempt "
                "would be claimed again while it is still being sent"
            )
        return self


class WebPushSettings(BaseModel):
    """Web Push (RFC 8030/8291/8292): the hub's VAPID identity towards push services."""

    vapid_private_key: SecretStr | None = None
    """`NOTIFYHUB_WEBPUSH__VAPID_PRIVATE_KEY`: the P-256 private key (PEM, or the raw
    32-byte scalar in base64url as py-vapid writes it). Unset: the hub makes one at its
    first start and keeps it in PostgreSQL (`vapid_keys`), shared by every process.
    Never shown by the API."""
    subject: str = Field("mailto:admin@localhost", pattern=r"^(mailto:\S+@\S+|https://\S+)$")
    """`NOTIFYHUB_WEBPUSH__SUBJECT`: the VAPID `sub` claim, a `mailto:` or `https:` URL a
    push service's operator can reach you at."""


class RateLimits(BaseModel):
    """Token buckets in Redis: requests per second and burst; a rate of 0 turns one off."""

    per_key_per_s: float = Field(10_000.0, ge=0)
    per_key_burst: int = Field(20_000, ge=1)
    per_user_per_s: float = Field(100.0, ge=0)
    per_user_burst: int = Field(1000, ge=1)


class DatabaseSettings(BaseModel):
    """How long the hub waits for PostgreSQL before a request answers 503 (each bound
    alone stays under the 5 s a client waits; one request meets at most one of them)."""

    connect_timeout_s: float = Field(2.0, gt=0)
    statement_timeout_s: float = Field(3.0, gt=0)
    """Per statement, on the server (`statement_timeout`) and in the driver (a server that
    does not answer at all). Background work shares the engine: a rebuild reading a very
    large table in one statement needs more (or `notifyhub restore`, which waits 30 s)."""
    pool_timeout_s: float = Field(2.0, gt=0)
    """Waiting for a free pooled connection."""


class ApiKeySettings(BaseModel):
    """The in-process cache of verified API keys (services/keycache.py)."""

    cache_ttl_s: float = Field(30.0, gt=0)
    """A key is checked against PostgreSQL again after this long: a revoked key stops
    working within it while PostgreSQL is up."""
    cache_stale_s: float = Field(3600.0, ge=0)
    """While PostgreSQL is unreachable, a key verified before keeps working for this long
    past its TTL (0: not at all)."""


class Settings(BaseSettings):
    """Configuration from `NOTIFYHUB_*` environment variables or `.env`."""

    model_config = SettingsConfigDict(
        env_prefix="NOTIFYHUB_", env_file=".env", env_nested_delimiter="__", extra="ignore"
    )

    redis_url: str | None = None
    database_url: str | None = None
    data_dir: Path = Path(".notifyhub")
    redis_prefix: str = "nh:"
    redis_pool_size: int = Field(128, ge=4)
    """Connections the shared Redis client may hold; callers beyond wait for one."""
    redis_pool_timeout_s: float = Field(2.0, gt=0)
    redis_timeout_s: float = Field(2.0, gt=0)
    """A request's Redis command (or pipeline) fails after this long without a reply (a
    503); a refused connection fails at once (after three quick retries)."""
    request_deadline_s: float = Field(3.5, gt=0)
    """Every request starts its answer within this long, whatever Redis and PostgreSQL do:
    past it, its store calls are cancelled and it answers 503 (api/deadline.py). One
    budget for all of a request's calls, below a client's usual 5 s timeout; an event
    stream's applies to its opening, a long poll's to each of its rounds, a fan-out's to
    each of its batches (notifyhub/deadline.py)."""
    redis_pubsub_shards: int = Field(16384, ge=1, le=16384)
    """Doorbell channels: a process hears those of its streams' users (every process must
    agree; 1: one channel all hear, as hubs before shards did; docs/scaling.md)."""
    redis_wait_replicas: int = Field(0, ge=0)
    """Before acknowledging a delivery, WAIT until this many replicas of each master
    written have it (at most `redis_wait_timeout_ms`). 0: asynchronous replication, so a
    master failover can lose the last acknowledged deliveries (docs/scaling.md)."""
    redis_wait_timeout_ms: int = Field(100, ge=1)

    jwt_secret: SecretStr | None = None
    jwt_public_key: str | None = None
    jwt_algorithm: JwtAlgorithm = "HS256"
    jwt_audience: str = "notifyhub"
    jwt_issuer: str | None = None
    dev_mode: bool = False

    default_ttl_s: int = Field(30 * 24 * 3600, ge=1)
    max_ttl_s: int = Field(366 * 24 * 3600, ge=1)
    idempotency_ttl_s: int = Field(24 * 3600, ge=60)
    routing_trace_ttl_s: int = Field(7 * 24 * 3600, ge=60)
    """How long a notification's routing trace is kept
    (`GET /v1/admin/notifications/{id}/trace`)."""
    routing_trace_users: int = Field(10_000, ge=0)
    """Recipients of one notification whose routing gets a line of its own in its trace
    (the rest are counted); 0: no routing traces."""
    deliveries_allow_private_networks: bool = False
    amqp_url: SecretStr | None = None
    """`NOTIFYHUB_AMQP_URL`: the RabbitMQ broker `rabbitmq` delivery definitions publish to
    (`amqp://user:pass@host:5672/vhost`); never shown by the API."""
    cors_origins: list[str] = []
    producers_file: Path | None = None
    traces_exporter: str = Field(
        "none", validation_alias=AliasChoices("OTEL_TRACES_EXPORTER", "traces_exporter")
    )
    """OpenTelemetry's standard `OTEL_TRACES_EXPORTER` (`otlp`, `console`...): tracing is
    on when it names an exporter, off for `none` (notifyhub/tracing.py); the SDK reads the
    other `OTEL_*` variables itself."""

    limits: Limits = Limits()
    stream: StreamSettings = StreamSettings()
    gc: GcSettings = GcSettings()
    workers: WorkerSettings = WorkerSettings()
    delayed: DelayedSettings = DelayedSettings()
    deliveries: DeliverySettings = DeliverySettings()
    rate_limits: RateLimits = RateLimits()
    database: DatabaseSettings = DatabaseSettings()
    api_keys: ApiKeySettings = ApiKeySettings()
    webpush: WebPushSettings = WebPushSettings()

    inbox_durability: InboxDurability = "redis"
    """`postgres`: notifications committed to PostgreSQL before the 202, inboxes rebuilt."""
    inbox_changes_flush_interval_s: float = Field(0.2, gt=0)

    @model_validator(mode="after")
    def _check_jwt(self) -> Settings:
        if self.jwt_algorithm == "HS256":
            secret = self.jwt_secret.get_secret_value() if self.jwt_secret else ""
            if len(secret) < 32 and not (self.dev_mode or self.embedded):
                raise ValueError(
                    "NOTIFYHUB_JWT_SECRET must be at least 32 characters "
                    "(or set NOTIFYHUB_JWT_PUBLIC_KEY with an RS256/ES256 algorithm)"
                )
        elif not self.jwt_public_key:
            raise ValueError(f"NOTIFYHUB_JWT_PUBLIC_KEY is required for {self.jwt_algorithm}")
        return self

    @model_validator(mode="after")
    def _check_cors(self) -> Settings:
        # Credentials are allowed on cross-origin requests, so `*` would let any site
        # read a user's inbox with their cookies/headers: name the origins instead.
        if "*" in self.cors_origins:
            raise ValueError(
                "NOTIFYHUB_CORS_ORIGINS must list origins: `*` is refused with credentials"
            )
        return self

    @property
    def embedded(self) -> bool:
        """True when neither Redis nor PostgreSQL is configured: run embedded servers."""
        return self.redis_url is None and self.database_url is None
