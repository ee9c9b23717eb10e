"""A definition's webhook URLs checked when it is stored, by the SSRF guard's own rule.

A target the guard would refuse at every attempt is refused at `PUT` instead, with the
address, the reason and the setting that would allow it. Literal addresses (in every
spelling the connect-time resolver accepts: `127.1`, `2130706433`, `0x7f000001`,
`0177.0.0.1`, `0`, `[::ffff:127.0.0.1]`) and `localhost` are judged without the
network; a name is resolved with a short timeout and refused only when every address
it has is blocked. A name that does not resolve now is accepted with a warning: it may
resolve tomorrow. This check is for people, not for safety: the guard at connect time
stays, because a name can resolve elsewhere by then (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Awaitable, Callable

import httpcore
import httpx

from notifyhub.errors import BlockedTarget, InvalidInput
from notifyhub.services.outbound import AddressGuard, IPAddress, parse_address

ALLOW_PRIVATE_ENV = "NOTIFYHUB_DELIVERIES_ALLOW_PRIVATE_NETWORKS"
ALLOW_NETWORKS_ENV = "NOTIFYHUB_DELIVERIES__ALLOW_NETWORKS"
RESOLVE_TIMEOUT_S = 2.0
LOCALHOST = ("127.0.0.1", "::1")
"""What `localhost` and `*.localhost` always mean (RFC 6761), whatever a resolver says."""

Resolver = Callable[[str], Awaitable[list[str]]]
"""A host name's addresses (raises OSError when it has none)."""


async def system_resolver(host: str) -> list[str]:
    """The addresses the connect-time guard would see (the loop's getaddrinfo)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def literal_addresses(host: str) -> list[str] | None:
    """The addresses a literal host means, read as the resolver reads it; None for a name.

    `AI_NUMERICHOST` parses without ever asking DNS, accepting exactly the spellings a
    connect would (inet_aton's shorthand, decimal, octal and hex forms included).
    """
    name = host.rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return list(LOCALHOST)
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError):
        return None
    return [str(info[4][0]) for info in infos]


def sender_host(field: str, url: str) -> str:
    """`url`'s host as the sender reads it; a URL the sender cannot read is refused
    (it would never be sent), with its ASCII spelling as the fix."""
    try:
        return httpcore.URL(url).host.decode("ascii")
    except (TypeError, ValueError) as exc:
        fix = _spelled(url)
        raise InvalidInput(f"{field}: not a URL the hub can send to ({exc}){fix}") from exc


def _spelled(url: str) -> str:
    """The fix a refusal suggests: the URL's ASCII spelling, when it has one (a URL
    httpx cannot read either, `https://host:xx/`, gets none: its error says why)."""
    try:
        return f"; write it as {httpx.URL(url)}"
    except httpx.InvalidURL:
        return ""


def _cidr(address: IPAddress) -> str:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # the guard judges (and allows) the IPv4 address
    return f"{address}/{address.max_prefixlen}"


def _refused(field: str, url: str, host: str, refusals: dict[IPAddress, str]) -> BlockedTarget:
    means = "is" if literal_addresses(host) is not None else "resolves only to"
    reasons = ", ".join(f"{address} ({why})" for address, why in refusals.items())
    cidrs = json.dumps(sorted({_cidr(address) for address in refusals}))
    return BlockedTarget(
        f"{field}: the SSRF guard blocks {url}: {host} {means} {reasons}, which webhooks "
        f"may not reach. To deliver there (say, to a local test receiver), set "
        f"{ALLOW_NETWORKS_ENV}='{cidrs}' to allow these addresses only, or "
        f"{ALLOW_PRIVATE_ENV}=true to allow every private address, and restart the hub."
    )


class TargetCheck:
    """Judges a definition's URLs by the guard's rule before they are stored."""

    def __init__(
        self,
        guard: AddressGuard,
        resolver: Resolver = system_resolver,
        timeout_s: float = RESOLVE_TIMEOUT_S,
    ) -> None:
        self._guard = guard
        self._resolver = resolver
        self._timeout_s = timeout_s

    async def check(self, field: str, url: str) -> str | None:
        """Raise `BlockedTarget` when every address of `url`'s host is blocked (and
        `InvalidInput` when the sender cannot read it, or it is no host name); else a
        warning worth showing (None when there is nothing to say)."""
        host = sender_host(field, url)
        addresses = literal_addresses(host)
        if addresses is None:
            try:
                async with asyncio.timeout(self._timeout_s):
                    addresses = await self._resolver(host)
            except UnicodeError as exc:  # IDNA: an empty label, or one past 63 characters
                raise InvalidInput(f"{field}: {host!r} is not a host name ({exc})") from exc
            except (OSError, TimeoutError) as exc:
                why = str(exc) or f"no answer within {self._timeout_s:g}s"
                return (
                    f"{field}: {host} does not resolve now ({why}); accepted, and "
                    f"checked again by the SSRF guard before every attempt"
                )
        parsed = [parse_address(address) for address in addresses]
        judged = {address: self._guard.refusal(address) for address in parsed}
        refusals = {address: why for address, why in judged.items() if why is not None}
        if refusals and len(refusals) == len(judged):
            raise _refused(field, url, host, refusals)
        if refusals:
            blocked = ", ".join(str(address) for address in refusals)
            return f"{field}: {host} also resolves to blocked {blocked}; attempts skip them"
        return None
