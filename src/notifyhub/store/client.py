"""Redis clients from a URL (plain, TLS, unix socket, Sentinel or Cluster) and a start-up
durability check.

Sentinel URLs name every sentinel, the monitored service and the database:

    redis+sentinel://[[user]:password@]host:port[,host:port...]/service_name[/db]
        [?sentinel_password=...]

The password (if any) is the master's; `sentinel_password` authenticates to the
sentinels themselves. The client asks the sentinels for the current master on every
(re)connect, so a failover costs the commands in flight, which are retried.

Cluster URLs name one or more seed nodes (the client discovers the rest):

    redis+cluster://[[user]:password@]host:port[,host:port...][/][?tls=1]

A cluster client is a `redis.asyncio.RedisCluster`; it is handed around typed as `Redis`
(see `connect`) because every command notifyhub sends through it names keys of one slot
(store/keys.py hash tags) and the few cluster-specific steps sit behind `is_cluster`:
per-slot script calls (store/inbox/placing.py, announcing.py) and sharded doorbells
(store/doorbells.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import SplitResult, parse_qs, quote, unquote, urlsplit

import hiredis
from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelManagedConnection
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, RedisError

log = logging.getLogger(__name__)

SENTINEL_SCHEME = "redis+sentinel"
CLUSTER_SCHEME = "redis+cluster"
DEFAULT_SENTINEL_PORT = 26379
DEFAULT_PORT = 6379


@dataclass(frozen=True, slots=True)
class SentinelUrl:
    """The parts of a `redis+sentinel://` URL."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterUrl:
    """The parts of a `redis+cluster://` URL."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    tls: bool = False

    def node_url(self, host: str, port: int) -> str:
        """A plain `redis://` (or `rediss://`) URL for one node, with these credentials."""
        scheme = "rediss" if self.tls else "redis"
        auth = ""
        if self.username or self.password:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password or '', safe='')}@"
        return f"{scheme}://{auth}{host}:{port}/0"


def _host_port(part: str, default_port: int = DEFAULT_SENTINEL_PORT) -> tuple[str, int]:
    if part.startswith("["):  # [::1]:26379
        host, _, rest = part[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = part.rpartition(":") if ":" in part else (part, "", "")
    if not host:
        raise ValueError(f"Sentinel URL: no host in {part!r}")
    return host, int(port) if port else default_port


@dataclass(frozen=True)
class _MultiHostUrl:
    """A `scheme://[user:password@]host:port,host:port/...` URL, split."""

    parts: SplitResult
    hosts: list[str]
    username: str | None
    password: str | None


def _split_multi_host(url: str, scheme: str) -> _MultiHostUrl | None:
    """Split a Sentinel or Cluster URL (several hosts); None for any other scheme."""
    parts = urlsplit(url)
    if parts.scheme != scheme:
        return None
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    return _MultiHostUrl(
        parts,
        [h for h in hosts.split(",") if h],
        unquote(username) or None,
        unquote(password) or None,
    )


def parse_sentinel_url(url: str) -> SentinelUrl | None:
    """The Sentinel settings of a `redis+sentinel://` URL; None for any other scheme."""
    split = _split_multi_host(url, SENTINEL_SCHEME)
    if split is None:
        return None
    parts, hosts = split.parts, split.hosts
    path = [unquote(p) for p in parts.path.split("/") if p]
    if not path or len(path) > 2 or not hosts:
        raise ValueError("Sentinel URL: expected redis+sentinel://host:port,.../service_name[/db]")
    query = parse_qs(parts.query)
    return SentinelUrl(
        sentinels=tuple(_host_port(h) for h in hosts),
        service=path[0],
        db=int(path[1]) if len(path) == 2 else 0,
        username=split.username,
        password=split.password,
        sentinel_password=query.get("sentinel_password", [None])[0],
    )


def parse_cluster_url(url: str) -> ClusterUrl | None:
    """The seed nodes and credentials of a `redis+cluster://` URL; None for other schemes."""
    split = _split_multi_host(url, CLUSTER_SCHEME)
    if split is None:
        return None
    parts = split.parts
    if not split.hosts or parts.path.strip("/"):
        raise ValueError("Cluster URL: expected redis+cluster://host:port[,host:port...]")
    tls = parse_qs(parts.query).get("tls", ["0"])[0] in ("1", "true", "yes")
    return ClusterUrl(
        nodes=tuple(_host_port(h, DEFAULT_PORT) for h in split.hosts),
        username=split.username,
        password=split.password,
        tls=tls,
    )


def is_cluster(redis: Redis) -> bool:
    """Whether `redis` is a Redis Cluster client (the one mode-specific question)."""
    return isinstance(redis, RedisCluster)


async def server_identity(redis: Redis) -> str:
    """The server's INFO run_id; on a Cluster every master's, sorted and joined, so that
    a restart (or a failover) of any shard changes it."""
    if not is_cluster(redis):
        return str((await redis.info("server"))["run_id"])
    found = await redis.info("server", target_nodes=RedisCluster.PRIMARIES)
    return ",".join(sorted(str(info["run_id"]) for info in found.values()))


def _cluster(cluster: ClusterUrl, pool_size: int | None, options: dict[str, Any]) -> Redis:
    options.pop("pool_timeout", None)
    client = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in cluster.nodes],
        username=cluster.username,
        password=cluster.password,
        ssl=cluster.tls,
        # Per node; the cluster client refuses (never waits) past it, so leave headroom.
        max_connections=4 * (pool_size or 128),
        require_full_coverage=False,
        **options,
    )
    return cast("Redis", client)


class _HiredisPacking:
    """Commands packed by hiredis' C packer, as redis-py's sync connections already do:
    its asyncio connections pack in Python, per argument, and a big fan-out sends
    hundreds of thousands of arguments (docs/scaling.md, "Design notes")."""

    def pack_command(self, *args: Any) -> list[bytes]:
        if isinstance(args[0], str):  # "CONFIG GET" style names are sent as two arguments
            args = tuple(args[0].encode().split()) + args[1:]
        elif b" " in args[0]:
            args = tuple(args[0].split()) + args[1:]
        try:
            return [hiredis.pack_command(args)]
        except TypeError:  # hiredis takes bytes, not bytearray or memoryview: convert those
            args = tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args)
        try:
            return [hiredis.pack_command(args)]
        except TypeError as exc:  # redis-py's own packer raises DataError for these
            raise DataError(str(exc)) from exc


_PACKING: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def hiredis_packing(cls: type[AbstractConnection]) -> type[AbstractConnection]:
    """`cls` (plain, TLS, unix socket or Sentinel-managed) packing with hiredis."""
    if cls not in _PACKING:
        _PACKING[cls] = type(cls.__name__, (_HiredisPacking, cls), {})
    return _PACKING[cls]


def connect(url: str, *, pool_size: int | None = None, **options: Any) -> Redis:
    """A client for `url`: `redis://`, `rediss://`, `unix://`, `redis+sentinel://` or
    `redis+cluster://` (a `RedisCluster`, see the module docstring).

    With `pool_size`, a bounded pool whose callers wait (up to `pool_timeout`) for a free
    connection: redis-py's default pool raises `MaxConnectionsError` at 100 at once,
    which a broadcast to thousands of streams or a burst of stream openings reaches.
    """
    cluster = parse_cluster_url(url)
    if cluster is not None:
        return _cluster(cluster, pool_size, options)
    sentinel = parse_sentinel_url(url)
    if sentinel is None:
        if pool_size is None:
            client = Redis.from_url(url, **options)
            pool = client.connection_pool
        else:
            timeout = options.pop("pool_timeout", 5.0)
            pool = BlockingConnectionPool.from_url(
                url, max_connections=pool_size, timeout=timeout, **options
            )
            client = Redis.from_pool(pool)
        pool.connection_class = hiredis_packing(pool.connection_class)  # the URL's kind
        return client
    options.pop("pool_timeout", None)
    sentinel_kwargs = {"password": sentinel.sentinel_password} if sentinel.sentinel_password else {}
    sentinels = Sentinel(list(sentinel.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
    master: Redis = sentinels.master_for(
        sentinel.service,
        db=sentinel.db,
        username=sentinel.username,
        password=sentinel.password,
        connection_class=hiredis_packing(SentinelManagedConnection),
        **options,
    )
    return master


async def close(redis: Redis) -> None:
    """Close a client from `connect`, with the sentinel connections a Sentinel one made."""
    await redis.aclose()
    pool = getattr(redis, "connection_pool", None)  # a RedisCluster has none
    manager = getattr(pool, "sentinel_manager", None)
    for sentinel in getattr(manager, "sentinels", ()):
        await sentinel.aclose()


SOCKET_TIMEOUT_S = 2.0
"""How long a reply may take before the call fails with a timeout (a 503 on a request):
under the 5 s a client waits, with the rate limiter's own short budget on top
(store/ratelimit.py). Big pipelines are bounded by one timer of this length too."""
CONNECT_TIMEOUT_S = 1.0
RETRIES = 3
"""Retries of a command whose connection was refused or lost (a restart, a failover),
with backoff of 50 ms doubling: a quarter of a second in all. A timeout is not retried:
a Redis that does not answer would make each retry cost the whole timeout again."""


def create_redis(
    url: str,
    *,
    pool_size: int = 128,
    pool_timeout_s: float = 2.0,
    socket_timeout_s: float | None = SOCKET_TIMEOUT_S,
) -> Redis:
    """The shared client: idempotent commands (all our scripts are) retried with backoff
    when a connection fails, at most `pool_size` connections (callers wait for one up to
    `pool_timeout_s`).

    `socket_timeout_s=None` makes the client for big pipelines: redis-py arms a timer
    for every reply it reads, so big pipelines of stream reads spend much of their time
    on timers (docs/scaling.md, "Design notes"); those pipelines bound their whole execution
    with one timer instead (`scripts.pipelined`)."""
    retry = Retry(
        ExponentialWithJitterBackoff(base=0.05, cap=1.0),
        RETRIES,
        supported_errors=(RedisConnectionError,),
    )
    return connect(
        url,
        pool_size=pool_size,
        pool_timeout=pool_timeout_s,
        retry=retry,
        health_check_interval=30,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
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
