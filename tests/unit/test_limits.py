"""Request limits: size (declared and chunked), JSON depth and UTF-8, before any parsing."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel, JsonValue
from starlette.types import Message, Receive, Scope, Send

from notifyhub.api.errors import install_error_handlers
from notifyhub.api.limits import DRAIN_BYTES, RequestLimits, json_depth

LIMIT = 64 * 1024
JSON = {"content-type": "application/json"}


class Body(BaseModel):
    value: JsonValue = None


def tiny_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    app.add_middleware(RequestLimits, max_body_bytes=LIMIT)

    @app.post("/echo")
    async def echo(body: Body) -> dict[str, int]:
        return {"bytes": len(str(body.value))}

    @app.get("/hello")
    async def hello() -> dict[str, str]:
        return {"hello": "world"}

    return app


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=tiny_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


def _nested(levels: int) -> bytes:
    """`{"value": [[...]]}` nested `levels` deep in all (the object is one level)."""
    inner = levels - 1
    return b'{"value":' + b"[" * inner + b"]" * inner + b"}"


def _assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    problem: dict[str, Any] = response.json()
    assert problem["status"] == status
    assert set(problem) >= {"type", "title", "status", "detail"}
    return problem


async def test_declared_10_mb_body_is_413(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", content=b"x" * (10 * 1024 * 1024), headers=JSON)
    problem = _assert_problem(response, 413)
    assert str(LIMIT) in problem["detail"]
    assert response.headers["connection"] == "close"


async def test_chunked_body_over_the_cap_is_413_and_its_rest_drained(
    client: httpx.AsyncClient,
) -> None:
    """Refused once it passes the cap (the app never sees it), the rest read and dropped
    so that a client still sending reads the answer."""
    pulled = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(10 * 1024):  # 10 MB in 1 KiB chunks, no Content-Length
            pulled += 1
            yield b"x" * 1024

    response = await client.post("/echo", content=chunks(), headers=JSON)
    _assert_problem(response, 413)
    assert pulled == 10 * 1024


async def test_body_exactly_at_the_limit_passes_one_more_byte_does_not(
    client: httpx.AsyncClient,
) -> None:
    value = "x" * (LIMIT - len(b'{"value":""}'))
    body = f'{{"value":"{value}"}}'.encode()
    assert len(body) == LIMIT
    response = await client.post("/echo", content=body, headers=JSON)
    assert response.status_code == 200
    assert response.json() == {"bytes": len(value)}
    _assert_problem(await client.post("/echo", content=body + b" ", headers=JSON), 413)


async def test_10_000_levels_of_nesting_is_422_before_parsing(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", content=_nested(10_000), headers=JSON)
    problem = _assert_problem(response, 422)
    assert problem["detail"] == "JSON nested deeper than 32 levels"


async def test_unclosed_deep_nesting_without_content_type_is_422(
    client: httpx.AsyncClient,
) -> None:
    # FastAPI parses a body without a content type as JSON, so it is checked too.
    response = await client.post("/echo", content=b"[" * 10_000)
    assert _assert_problem(response, 422)["detail"] == "JSON nested deeper than 32 levels"


async def test_depth_32_passes_and_33_does_not(client: httpx.AsyncClient) -> None:
    assert (await client.post("/echo", content=_nested(32), headers=JSON)).status_code == 200
    _assert_problem(await client.post("/echo", content=_nested(33), headers=JSON), 422)


async def test_brackets_inside_strings_do_not_count(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", json={"value": "[" * 1000})
    assert response.status_code == 200
    escaped = await client.post("/echo", json={"value": ['\\"' + "{" * 1000, '"[[[', "\\"]})
    assert escaped.status_code == 200


async def test_invalid_utf8_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", content=b'{"value": "\xff\xfe"}', headers=JSON)
    assert _assert_problem(response, 422)["detail"] == "request body is not valid UTF-8"
    surrogate = await client.post("/echo", content=b'{"value": "\xed\xa0\x80"}', headers=JSON)
    _assert_problem(surrogate, 422)


async def test_get_passes(client: httpx.AsyncClient) -> None:
    response = await client.get("/hello")
    assert response.status_code == 200
    assert response.json() == {"hello": "world"}


def _scope(method: str, headers: list[tuple[bytes, bytes]]) -> Scope:
    return {"type": "http", "method": method, "path": "/", "headers": headers}


async def _never_receive() -> Message:
    raise AssertionError("the middleware must not read this body")


async def _ignore(message: Message) -> None:
    return None


async def test_bodyless_requests_pass_through_untouched() -> None:
    seen: list[Receive] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(receive)

    limits = RequestLimits(app, max_body_bytes=LIMIT)
    stream = _scope("GET", [(b"accept", b"text/event-stream")])
    await limits(stream, _never_receive, _ignore)
    assert seen == [_never_receive]  # the very same receive: no buffering, no wrapper


async def _refuse(length: int, receive: Receive) -> list[Message]:
    sent: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("the app must not run")

    async def send(message: Message) -> None:
        sent.append(message)

    limits = RequestLimits(app, max_body_bytes=LIMIT)
    await limits(_scope("POST", [(b"content-length", str(length).encode())]), receive, send)
    return sent


async def test_a_declared_oversize_is_drained_unbuffered_then_refused() -> None:
    """The rest of a body declared past the cap is read and dropped before the 413."""
    chunks = [{"type": "http.request", "body": b"x" * LIMIT, "more_body": True}] * 159
    chunks.append({"type": "http.request", "body": b"x" * LIMIT, "more_body": False})

    async def receive() -> Message:
        return chunks.pop(0)

    sent = await _refuse(10 * 1024 * 1024, receive)
    assert sent[0]["status"] == 413 and not chunks


async def test_a_body_declared_past_the_drain_cap_is_refused_without_reading_it() -> None:
    sent = await _refuse(DRAIN_BYTES + 1, _never_receive)
    assert sent[0]["status"] == 413


async def test_body_is_replayed_once_then_later_messages_pass_through() -> None:
    incoming: list[Message] = [
        {"type": "http.request", "body": b'{"a":', "more_body": True},
        {"type": "http.request", "body": b"1}", "more_body": False},
        {"type": "http.disconnect"},
    ]
    received: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        received.extend([await receive(), await receive()])

    await RequestLimits(app, max_body_bytes=LIMIT)(_scope("POST", []), receive, _ignore)
    assert received == [
        {"type": "http.request", "body": b'{"a":1}', "more_body": False},
        {"type": "http.disconnect"},
    ]


async def test_client_gone_mid_body_never_reaches_the_app() -> None:
    incoming: list[Message] = [
        {"type": "http.request", "body": b'{"a":', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> Message:
        return incoming.pop(0)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("the app must not run")

    await RequestLimits(app, max_body_bytes=LIMIT)(_scope("POST", []), receive, _ignore)


def _reference_depth(body: bytes) -> int:
    """The obvious byte-by-byte scan that `json_depth` must agree with."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            escaped, in_string = (False, True) if escaped else (byte == 0x5C, byte != 0x22)
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


def test_json_depth_matches_a_byte_by_byte_scan() -> None:
    assert json_depth(b'{"a": [1, {"b": "[[[["}]}') == 3
    assert json_depth(b'"\\"[["') == 0
    assert json_depth(b'"\\\\"[[') == 2
    assert json_depth(b"]]][[") == 0
    rng = random.Random(7)
    for _ in range(5000):
        body = bytes(rng.choice(b'[]{}"\\x') for _ in range(rng.randint(0, 40)))
        assert json_depth(body) == _reference_depth(body), body


def test_json_depth_across_chunks() -> None:
    body = b"[1]," * 30_000 + b"[" * 40 + b'"]]]' + b"]" * 40
    assert json_depth(body) == _reference_depth(body) == 40
    assert json_depth(body, stop_above=32) > 32
