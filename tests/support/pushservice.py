"""A local Web Push service (RFC 8030, enough of it) on 127.0.0.1 for tests.

`POST /push/<id>` is checked as a push service checks it: the VAPID token (RFC 8292:
ES256 signed by the key in `k`, which must be the key the subscription was made with,
`aud` the endpoint's origin, `exp` at most 24 hours ahead, `sub` present) and the
encrypted body (RFC 8291 aes128gcm, decrypted with the browser's private key and auth
secret). It keeps what it got and answers 201, or what the test planned for the
subscription (404, 410, 429, 500...). A request it refuses is answered 401/400 and
kept too, with the reason.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import http_ece
import jwt
import orjson
from cryptography.hazmat.primitives.asymmetric import ec

from support.webpush import Browser

MAX_EXP_S = 24 * 3600


class VapidRefused(Exception):
    """The request's VAPID authorization is not one a push service accepts."""


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify_vapid(
    authorization: str | None, audience: str, expected_key: str | None, now: float | None = None
) -> dict[str, Any]:
    """The claims of `Authorization: vapid t=<jwt>, k=<key>`, or VapidRefused saying why."""
    scheme, _, rest = (authorization or "").partition(" ")
    if scheme.lower() != "vapid":
        raise VapidRefused("no vapid authorization")
    params = dict(p.strip().split("=", 1) for p in rest.split(",") if "=" in p)
    token, key = params.get("t"), params.get("k")
    if not token or not key:
        raise VapidRefused("vapid needs t= and k=")
    if expected_key is not None and key != expected_key:
        raise VapidRefused("k is not the key the subscription was made with")
    try:
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), _b64url_decode(key))
        claims: dict[str, Any] = jwt.decode(
            token,
            public,
            algorithms=["ES256"],
            audience=audience,
            options={"require": ["exp", "aud", "sub"]},
        )
    except (ValueError, jwt.PyJWTError) as exc:
        raise VapidRefused(f"bad token: {exc}") from exc
    if claims["exp"] - (now if now is not None else time.time()) > MAX_EXP_S:
        raise VapidRefused("exp is more than 24 hours ahead")
    if not str(claims["sub"]).startswith(("mailto:", "https:")):
        raise VapidRefused("sub must be a mailto: or https: URL")
    return claims


@dataclass(frozen=True)
class Pushed:
    """One push request as the service got it."""

    subscription: str
    headers: dict[str, str]
    body: bytes
    status: int
    plaintext: bytes | None = None
    refusal: str | None = None

    @property
    def message(self) -> Any:
        assert self.plaintext is not None, self.refusal
        return orjson.loads(self.plaintext)


@dataclass
class _Subscription:
    browser: Browser
    server_key: str | None
    replies: deque[int] = field(default_factory=deque)


class PushService:
    def __init__(self) -> None:
        self.received: list[Pushed] = []
        self._subscriptions: dict[str, _Subscription] = {}
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._arrived = asyncio.Condition()
        self.port = 0

    async def start(self) -> PushService:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def subscribe(self, browser: Browser, server_key: str | None = None) -> tuple[str, str]:
        """A new subscription for `browser` made with `server_key` (the hub's VAPID public
        key); (its id here, its endpoint)."""
        sid = secrets.token_urlsafe(9)
        self._subscriptions[sid] = _Subscription(browser, server_key)
        return sid, f"{self.origin}/push/{sid}"

    def plan(self, sid: str, *statuses: int) -> None:
        """Answer the subscription's next good pushes with `statuses`, then 201 (a 429
        says `Retry-After: 0`)."""
        self._subscriptions[sid].replies.extend(statuses)

    def of(self, sid: str) -> list[Pushed]:
        return [p for p in self.received if p.subscription == sid]

    async def wait_for(self, sid: str, count: int, timeout_s: float = 15.0) -> list[Pushed]:
        async with asyncio.timeout(timeout_s), self._arrived:
            await self._arrived.wait_for(lambda: len(self.of(sid)) >= count)
        return self.of(sid)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def _judge(self, sid: str, headers: dict[str, str], body: bytes) -> Pushed:
        found = self._subscriptions.get(sid)
        if found is None:
            return Pushed(sid, headers, body, 404, refusal="no such subscription")
        try:
            verify_vapid(headers.get("authorization"), self.origin, found.server_key)
        except VapidRefused as exc:
            return Pushed(sid, headers, body, 401, refusal=str(exc))
        if headers.get("content-encoding") != "aes128gcm":
            return Pushed(sid, headers, body, 400, refusal="content-encoding is not aes128gcm")
        try:
            plaintext = http_ece.decrypt(
                body,
                private_key=found.browser.private_key,
                auth_secret=found.browser.auth,
                version="aes128gcm",
            )
        except Exception as exc:  # http_ece raises several kinds
            return Pushed(sid, headers, body, 400, refusal=f"cannot decrypt: {exc}")
        status = found.replies.popleft() if found.replies else 201
        return Pushed(sid, headers, body, status, plaintext=plaintext)

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        line = await reader.readline()
        if not line:
            return False
        path = line.split()[1].decode()
        headers: dict[str, str] = {}
        while (raw := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = raw.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        sid = path.removeprefix("/push/") if path.startswith("/push/") else ""
        pushed = self._judge(sid, headers, body)
        async with self._arrived:
            self.received.append(pushed)
            self._arrived.notify_all()
        reply = (pushed.refusal or "").encode()
        head = f"HTTP/1.1 {pushed.status} X\r\nContent-Length: {len(reply)}\r\n"
        if pushed.status == 201:
            head += f"Location: {self.origin}/message/{secrets.token_hex(4)}\r\n"
        if pushed.status == 429:
            head += "Retry-After: 0\r\n"
        writer.write((head + "\r\n").encode() + reply)
        await writer.drain()
        return True
