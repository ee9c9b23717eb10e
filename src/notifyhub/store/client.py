"""Redis clients from a URL (plain, TLS, unix socket or Sentinel) and a start-up durability check.

Sentinel URLs name every sentinel, the monitored service and the database:

    redis+sentinel://[[user]:password@]host:port[,host:port...]/service_name[/db]
        [?sentinel_password=...]

The password (if any) is the master's; `sentinel_password` authenticates to the
sentinels themselves. The client asks the sentinels for the current master on every
(re)connect, so a failover costs the commands in flight, which are retried.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

SENTINEL_SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379


@dataclass(frozen=True, slots=True)
class SentinelUrl:
    """The parts of a `redis+sentinel://` URL."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None


def _host_port(part: str) -> tuple[str, int]:
    if part.startswith("["):  # [::1]:26379
        host, _, rest = part[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = part.rpartition(":") if ":" in part else (part, "", "")
    if not host:
        raise ValueError(f"Sentinel URL: no host in {part!r}")
    return host, int(port) if port else DEFAULT_SENTINEL_PORT


def parse_sentinel_url(url: str) -> SentinelUrl | None:
    """The Sentinel settings of a `redis+sentinel://` URL; None for any other scheme."""
    parts = urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        return None
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    path = [unquote(p) for p in parts.path.split("/") if p]
    if not path or len(path) > 2 or not hosts:
        raise ValueError("Sentinel URL: expected redis+sentinel://host:port,.../service_name[/db]")
    query = parse_qs(parts.query)
    return SentinelUrl(
        sentinels=tuple(_host_port(h) for h in hosts.split(",") if h),
        service=path[0],
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(username) or None,
        password=unquote(password) or None,
        sentinel_password=query.get("sentinel_password", [None])[0],
    )


def connect(url: str, *, pool_size: int | None = None, **options: Any) -> Redis:
    """A client for `url`: `redis://`, `rediss://`, `unix://` or `redis+sentinel://`.

    With `pool_size`, a bounded pool whose callers wait (up to `pool_timeout`) for a free
    connection: redis-py's default pool raises `MaxConnectionsError` at 100 at once,
    which a broadcast to thousands of streams or a burst of stream openings reaches.
    """
    sentinel = parse_sentinel_url(url)
    if sentinel is None:
        if pool_size is None:
            return Redis.from_url(url, **options)
        timeout = options.pop("pool_timeout", 5.0)
        pool = BlockingConnectionPool.from_url(
            url, max_connections=pool_size, timeout=timeout, **options
        )
        return Redis.from_pool(pool)
    options.pop("pool_timeout", None)
    sentinel_kwargs = {"password": sentinel.sentinel_password} if sentinel.sentinel_password else {}
    sentinels = Sentinel(list(sentinel.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
    master: Redis = sentinels.master_for(
        sentinel.service,
        db=sentinel.db,
        username=sentinel.username,
        password=sentinel.password,
        **options,
    )
    return master


SOCKET_TIMEOUT_S = 5.0
"""How long a reply may take before the call fails (and is retried, then a 503)."""


def create_redis(
    url: str,
    *,
    pool_size: int = 128,
    pool_timeout_s: float = 5.0,
    socket_timeout_s: float | None = SOCKET_TIMEOUT_S,
) -> Redis:
    """The shared client: idempotent commands (all our scripts are) retried with backoff,
    at most `pool_size` connections (callers wait for one up to `pool_timeout_s`).

    `socket_timeout_s=None` makes the client for big pipelines: redis-py arms a timer
    for every reply it reads (about 10 us each), so a pipeline of 500 stream reads
    spent a third of its time on timers; those pipelines bound their whole execution
    with one timer instead (`scripts.execute`)."""
    return connect(
        url,
        pool_size=pool_size,
        pool_timeout=pool_timeout_s,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), 3),
        health_check_interval=30,
        socket_connect_timeout=2.0,
        socket_timeout=socket_timeout_s,
    )


def durability_warnings(config: dict[str, str]) -> list[str]:
    """What in Redis' CONFIG can lose or evict acknowledged notifications."""
    warnings = []
    if config.get("appendonly", "no") != "yes" and not config.get("save", "").strip():
        warnings.append(
            'Redis runs without persistence (appendonly no, save ""): a restart loses '
            "every inbox; set `appendonly yes`"
        )
    policy = config.get("maxmemory-policy", "noeviction")
    if policy != "noeviction":
        warnings.append(
            f"Redis maxmemory-policy is {policy}: at maxmemory it evicts inbox keys "
            "silently; set `maxmemory-policy noeviction`"
        )
    return warnings


async def check_durability(redis: Redis) -> list[str]:
    """Log a warning per risky setting; tolerate CONFIG being disabled (managed Redis)."""
    config: dict[str, str] = {}
    try:
        for name in ("appendonly", "save", "maxmemory-policy"):
            found = await redis.config_get(name)
            config.update({_text(k): _text(v) for k, v in found.items()})
    except RedisError as exc:
        log.info("cannot read Redis CONFIG (%s); persistence and eviction not checked", exc)
        return []
    warnings = durability_warnings(config)
    for warning in warnings:
        log.warning(warning)
    return warnings


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value
