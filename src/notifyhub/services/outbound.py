"""The SSRF-safe HTTP client for webhooks: checked at connect time, no redirects, capped.

The target's host is resolved when a connection is opened, every resolved address is
checked against the blocked ranges (IPv4-mapped IPv6 unwrapped first), and the socket
connects to a checked address, so DNS rebinding between a check and the connect cannot
smuggle an internal address in. TLS still verifies the certificate against the host name.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import ipaddress
import socket
import ssl
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime

import httpcore

from notifyhub.domain.delivery import Outcome

IPv4Address = ipaddress.IPv4Address
IPv6Address = ipaddress.IPv6Address
IPAddress = IPv4Address | IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
OriginKey = tuple[bytes, bytes, int]

BLOCKED_NETWORKS: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(cidr), why)
    for cidr, why in (
        ("0.0.0.0/8", "a 'this network' address (0.0.0.0/8)"),
        ("10.0.0.0/8", "a private address (10.0.0.0/8)"),
        ("100.64.0.0/10", "a carrier-grade NAT address (100.64.0.0/10)"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address (cloud metadata services live here)"),
        ("172.16.0.0/12", "a private address (172.16.0.0/12)"),
        ("192.168.0.0/16", "a private address (192.168.0.0/16)"),
        ("224.0.0.0/4", "a multicast address"),
        ("::/128", "the unspecified address"),
        ("::1/128", "a loopback address"),
        ("fc00::/7", "a private (unique local) address"),
        ("fe80::/10", "a link-local address"),
        ("ff00::/8", "a multicast address"),
    )
)
"""Each blocked range and how a refusal names it."""
RETRY_AFTER_STATUSES = (429, 503)


class BlockedAddress(httpcore.ConnectError):
    """The target resolved only to addresses we refuse to connect to."""


def parse_address(resolved: str) -> IPAddress:
    """A resolver's address string as an address (an IPv6 zone such as `%eth0` dropped)."""
    return ipaddress.ip_address(resolved.split("%")[0])


NAT64_NETWORKS = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(address: IPv6Address) -> tuple[IPv4Address, str] | None:
    """The IPv4 address an IPv6 address carries and how, when a translator, tunnel or
    dual-stack host may deliver to it: NAT64 (RFC 6052), IPv4-compatible (`::a.b.c.d`),
    6to4 (2002::/16) and Teredo's client. IPv4-mapped is unwrapped before this."""
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address.teredo is not None:
        return address.teredo[1], "Teredo"
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in NAT64_NETWORKS[0]:
        return low32, "NAT64"
    if address in NAT64_NETWORKS[1]:  # RFC 6052 /48: the IPv4 address sits in bits 48-87
        packed = address.packed
        return ipaddress.IPv4Address(packed[6:8] + packed[9:11]), "NAT64"
    if address in IPV4_COMPATIBLE and int(address) > 1:
        return low32, "IPv4-compatible"
    return None


def blocked_because(address: IPAddress) -> str | None:
    """Why `address` is blocked unless allowed (None: a public address). An IPv6 address
    carrying an IPv4 one (NAT64, 6to4, ...) is blocked when that IPv4 address is."""
    for network, why in BLOCKED_NETWORKS:
        if address in network:
            return why
    if isinstance(address, ipaddress.IPv6Address):
        carried = embedded_ipv4(address)
        inner = carried and blocked_because(carried[0])
        if carried and inner:
            return f"{inner} ({carried[0]}) inside a {carried[1]} address"
    if address.is_multicast:
        return "a multicast address"
    if not address.is_global:
        return "a reserved address, not globally routable"
    return None


class AddressGuard:
    """Decides which resolved addresses a webhook may connect to."""

    def __init__(self, allow_private: bool = False, allow: Iterable[str] = ()) -> None:
        self.allow_private = allow_private
        self.allow = tuple(ipaddress.ip_network(cidr, strict=False) for cidr in allow)

    def refusal(self, address: IPAddress) -> str | None:
        """Why a webhook may not connect to `address` (None: it may).

        The one decision, made on every resolved address at connect time and on a
        definition's URLs when it is stored (`services/targets.py`).
        """
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if self.allow_private or any(address in network for network in self.allow):
            return None
        return blocked_because(address)

    def permits(self, address: IPAddress) -> bool:
        return self.refusal(address) is None

    async def resolve(self, host: str, port: int) -> list[str]:
        """The permitted addresses of `host`, in resolver order; raises if there are none."""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        found = list(dict.fromkeys(str(info[4][0]) for info in infos))
        permitted = [a for a in found if self.permits(parse_address(a))]
        if not permitted:
            raise BlockedAddress(f"{host} resolves to a blocked address ({', '.join(found)})")
        return permitted


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses the guard permits."""

    def __init__(self, guard: AddressGuard) -> None:
        self._guard = guard
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        error: httpcore.ConnectError | None = None
        for address in await self._guard.resolve(host, port):
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """`Retry-After` as seconds (delta-seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _judge(status: int, headers: list[tuple[bytes, bytes]]) -> tuple[str | None, float | None]:
    if 200 <= status < 300:
        return None, None
    if 300 <= status < 400:
        where = (_header(headers, b"location") or "?")[:200]
        return f"HTTP {status}: redirect to {where} not followed", None
    if status in RETRY_AFTER_STATUSES:
        return f"HTTP {status}", retry_after_s(_header(headers, b"retry-after"))
    return f"HTTP {status}", None


FAILURES: tuple[type[Exception], ...] = (
    httpcore.NetworkError,  # connect (incl. BlockedAddress), read, write
    httpcore.TimeoutException,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    ValueError,  # a URL httpcore cannot parse
    OSError,
)


@functools.cache
def _default_tls() -> ssl.SSLContext:
    """The default TLS context, built once per process: loading the CA bundle is costly,
    and one context serves every connection (nothing changes it after it is built)."""
    return ssl.create_default_context()


class Connections:
    """Idle keep-alive connections per origin, taken and given back in O(1).

    httpcore's own pool re-checks every connection on every request, which under
    concurrency costs more than the requests. Concurrency is bounded by the caller (the
    sender's semaphore), so this keeps at most `max_idle` idle connections per origin.
    """

    def __init__(self, backend: GuardedBackend, max_idle: int) -> None:
        self._backend = backend
        self._ssl = _default_tls()
        self._max_idle = max_idle
        self._idle: dict[OriginKey, list[httpcore.AsyncHTTPConnection]] = defaultdict(list)

    async def take(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        idle = self._idle[(origin.scheme, origin.host, origin.port)]
        while idle:
            connection = idle.pop()
            if connection.is_idle() and not connection.has_expired():
                return connection
            await connection.aclose()
        return httpcore.AsyncHTTPConnection(
            origin, ssl_context=self._ssl, keepalive_expiry=30.0, network_backend=self._backend
        )

    async def give(self, origin: httpcore.Origin, connection: httpcore.AsyncHTTPConnection) -> None:
        """Keep it for the next request to `origin` if it is reusable, else close it."""
        idle = self._idle[(origin.scheme, origin.host, origin.port)]
        if connection.is_idle() and len(idle) < self._max_idle:
            idle.append(connection)
        else:
            await connection.aclose()

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                await connection.aclose()
        self._idle.clear()


class Outbound:
    """POSTs signed webhooks: total timeout, no redirects (httpcore never follows them),
    response body read up to a cap, connections kept alive per origin."""

    def __init__(self, guard: AddressGuard, response_cap_bytes: int, max_connections: int) -> None:
        self._cap = response_cap_bytes
        self._connections = Connections(GuardedBackend(guard), max_connections)

    async def post(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        timeout_s: float,
        *,
        content_type: str = "application/json",
        reply_bytes: int = 0,
    ) -> Outcome:
        """POST `body`; a refusal's error keeps the first `reply_bytes` of its reply."""
        started = time.perf_counter()
        sent = [("content-type", content_type), ("content-length", str(len(body)))]
        sent.extend(headers.items())
        try:
            async with asyncio.timeout(timeout_s):
                status, error, wait_s = await self._exchange(
                    url, body, sent, timeout_s, reply_bytes
                )
        except TimeoutError:
            status, error, wait_s = None, f"timed out after {timeout_s:g}s", None
        except FAILURES as exc:
            status, error, wait_s = None, f"{type(exc).__name__}: {exc}"[:500], None
        return Outcome(status, error, time.perf_counter() - started, wait_s)

    async def _exchange(
        self,
        url: str,
        body: bytes,
        sent: list[tuple[str, str]],
        timeout_s: float,
        reply_bytes: int,
    ) -> tuple[int, str | None, float | None]:
        target = httpcore.URL(url)
        if target.scheme not in (b"http", b"https"):
            raise httpcore.UnsupportedProtocol(f"scheme {target.scheme!r} is not allowed")
        timeouts = dict.fromkeys(("connect", "read", "write", "pool"), timeout_s)
        connection = await self._connections.take(target.origin)
        try:
            request = connection.stream(
                "POST", target, headers=sent, content=body, extensions={"timeout": timeouts}
            )
            async with request as response:
                error, wait_s = _judge(response.status, response.headers)
                head = await self._drain(response, reply_bytes if error else 0)
        except BaseException:
            await connection.aclose()
            raise
        await self._connections.give(target.origin, connection)
        if head:
            reply = "".join(c if c.isprintable() else " " for c in head.decode("utf-8", "replace"))
            error = f"{error}: {reply.strip()}"
        return response.status, error, wait_s

    async def _drain(self, response: httpcore.Response, keep: int = 0) -> bytes:
        """Read (and drop) at most the cap: a 10 GB answer costs us `cap` bytes. The
        first `keep` bytes are returned."""
        read, kept = 0, b""
        async for chunk in response.aiter_stream():
            if len(kept) < keep:
                kept += chunk[: keep - len(kept)]
            read += len(chunk)
            if read >= self._cap:
                break
        return kept

    async def aclose(self) -> None:
        await self._connections.aclose()
