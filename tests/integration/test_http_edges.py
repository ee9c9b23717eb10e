"""The edges of HTTP before any route: CORS refusals and oversized request heads."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import jwt
import pytest

from notifyhub.api.protocol import MAX_HEAD_BYTES
from notifyhub.settings import Settings
from support.rawhttp import exchange, request_head

ORIGIN = "https://app.example"
PATH = "/v1/me/notifications"
PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"cors_origins": [ORIGIN]})


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


@pytest.mark.parametrize(
    ("origin", "method", "said"),
    [
        ("https://evil.example", "GET", "origin https://evil.example is not allowed"),
        (ORIGIN, "TRACE", "method TRACE is not allowed (allowed: GET, POST, PUT, PATCH, DELETE)"),
    ],
)
async def test_a_refused_preflight_is_a_problem(
    hub: Any, origin: str, method: str, said: str
) -> None:
    for path in ("/v1/me/notifications", "/v1/me/stream"):  # streams have their own entry
        headers = {"Origin": origin, "Access-Control-Request-Method": method}
        response = await hub.client.options(path, headers=headers)
        assert response.status_code == 400
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["status"] == 400 and said in problem["detail"]
        assert "access-control-allow-methods" in response.headers


async def test_an_allowed_preflight_still_passes(hub: Any) -> None:
    headers = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}
    response = await hub.client.options("/v1/me/notifications", headers=headers)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN


async def _send_head(hub: Any, header_bytes: int) -> tuple[int, bytes]:
    """Send a request whose one header is `header_bytes` long, 64 KiB at a time, until
    the hub closes the connection: the bytes sent, and what the hub answered."""
    host, port = hub.base_url.removeprefix("http://").split(":")
    loop, chunk, sent = asyncio.get_running_loop(), b"a" * 65536, 0
    sock = socket.socket()
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, (host, int(port)))
        await loop.sock_sendall(sock, b"GET /v1/me/notifications HTTP/1.1\r\nHost: x\r\nX-Big: ")
        try:
            async with asyncio.timeout(10):
                while sent < header_bytes:
                    await loop.sock_sendall(sock, chunk)
                    sent += len(chunk)
                await loop.sock_sendall(sock, b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the hub
        async with asyncio.timeout(5):
            return sent, await loop.sock_recv(sock, 4096)
    except ConnectionResetError:
        return sent, b""  # the reset can overtake the answer: closed either way
    finally:
        sock.close()


async def test_an_oversized_header_is_refused_before_it_is_buffered(hub: Any) -> None:
    rss_before = _rss_bytes()
    started = time.perf_counter()
    sent, answer = await _send_head(hub, 32 * 1024 * 1024)
    elapsed = time.perf_counter() - started
    rss_growth = _rss_bytes() - rss_before
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 ")
    assert sent < 32 * 1024 * 1024  # closed before the client could send it all
    assert elapsed < 5
    assert rss_growth < 8 * 1024 * 1024  # not the 32 MB it cost when buffered whole


async def test_a_large_but_allowed_header_passes(hub: Any) -> None:
    response = await hub.client.get("/healthz", headers={"X-Big": "a" * (MAX_HEAD_BYTES // 2)})
    assert response.status_code == 200
    _, refused = await _send_head(hub, 1024 * 1024)
    assert refused == b"" or refused.startswith(b"HTTP/1.1 431 ")


def _padded_token(make_token: Any, settings: Settings, size: int) -> str:
    """A validly signed user token padded (by a claim) to a little less than `size`."""
    claims = jwt.decode(make_token("padded"), options={"verify_signature": False})
    claims["pad"] = "p" * (size * 3 // 4 - 400)  # base64: 4 characters per 3 bytes
    assert settings.jwt_secret is not None
    return jwt.encode(claims, settings.jwt_secret.get_secret_value(), algorithm="HS256")


def _problem_431(answer: bytes) -> dict[str, Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 431 Request Header Fields Too Large", lines[0]
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    assert len(body) == int(headers["content-length"])
    problem: dict[str, Any] = json.loads(body)
    assert problem["status"] == 431
    assert str(MAX_HEAD_BYTES) in problem["detail"]
    return problem


@pytest.mark.parametrize("head_bytes", [MAX_HEAD_BYTES + 1, 200 * 1024, 1000 * 1024])
async def test_an_oversized_head_is_answered_431_and_closed_gracefully(
    hub: Any, make_token: Any, settings: Settings, head_bytes: int
) -> None:
    """A validly signed token padded past the cap (just past it, 200 KB, about 1 MB): the
    client sends its whole head, reads the 431 problem and then the end of the connection,
    never a reset."""
    token = _padded_token(make_token, settings, head_bytes)
    answer = await exchange(hub.base_url, request_head(PATH, token, head_bytes))
    _problem_431(answer)
    response = await hub.client.get("/healthz")  # the hub goes on
    assert response.status_code == 200


async def test_a_head_at_the_cap_is_served(hub: Any, make_token: Any) -> None:
    answer = await exchange(hub.base_url, request_head(PATH, make_token("u"), MAX_HEAD_BYTES))
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


async def test_an_http_client_reads_the_431(hub: Any, make_token: Any, settings: Settings) -> None:
    token = _padded_token(make_token, settings, 200 * 1024)
    response = await hub.client.get(
        "/v1/me/notifications", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 431
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["title"] == "Request header fields too large"


async def test_an_oversized_head_behind_a_stream_closes_it_without_an_answer(
    hub: Any, make_token: Any
) -> None:
    """A head pipelined behind an open stream and past the cap: no 431 written into the
    stream's body; the connection closes and the stream ends as its client's leaving."""
    host, port = hub.base_url.removeprefix("http://").split(":")
    loop, metrics = asyncio.get_running_loop(), hub.app_state["metrics"]
    with socket.socket() as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, (host, int(port)))
        await loop.sock_sendall(sock, request_head("/v1/me/stream", make_token("piped")))
        received = await loop.sock_recv(sock, 65536)
        assert received.startswith(b"HTTP/1.1 200 ")
        try:
            async with asyncio.timeout(10):
                await loop.sock_sendall(sock, request_head(PATH, "t", 200 * 1024))
                while chunk := await loop.sock_recv(sock, 65536):
                    received += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
    assert b"431" not in received
    async with asyncio.timeout(5):
        while hub.app_state["hub"].stream_count:
            await asyncio.sleep(0.02)
    ended = metrics.streams_dropped_total.labels(reason="error")._value.get()
    assert ended == 0


def _chunks(size: int) -> Iterator[bytes]:
    yield b'{"title": "'
    for _ in range(size // 65536):
        yield b"x" * 65536
    yield b'"}'


@pytest.mark.parametrize("size", [10 * 1024 * 1024, 40 * 1024 * 1024])
@pytest.mark.parametrize("chunked", [False, True])
async def test_an_http_client_still_sending_a_body_past_the_cap_reads_the_413(
    hub: Any, publish_key: str, size: int, chunked: bool
) -> None:
    """The hub reads and drops the rest of a refused body before it answers: closing on
    unread bytes reset the connection under a client still sending (httpx.ReadError)."""
    headers = {"Authorization": f"Bearer {publish_key}", "Content-Type": "application/json"}

    async def streamed() -> AsyncIterator[bytes]:  # no Content-Length: chunked
        for chunk in _chunks(size):
            yield chunk

    body = streamed() if chunked else b"".join(_chunks(size))
    response = await hub.client.post("/v1/notifications", content=body, headers=headers)
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert "request bodies are limited to" in response.json()["detail"]
    assert (await hub.client.get("/healthz")).status_code == 200
