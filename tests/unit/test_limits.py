"""Request limits and problem+json mapping on a tiny app (in-process ASGI transport)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel
from redis.exceptions import ConnectionError as RedisConnectionError

from notifyhub.api.errors import install_error_handlers
from notifyhub.api.limits import RequestLimits, json_depth
from notifyhub.errors import NotFound

LIMIT = 1024


class Body(BaseModel):
    value: Any = None


def tiny_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    app.add_middleware(RequestLimits, max_body_bytes=LIMIT)

    @app.post("/echo")
    async def echo(body: Body) -> dict[str, Any]:
        return {"ok": True}

    @app.get("/missing")
    async def missing() -> None:
        raise NotFound("no such thing")

    @app.get("/redis")
    async def redis_down() -> None:
        raise RedisConnectionError("refused")

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("secret internals")

    return app


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=tiny_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


async def test_declared_large_body_is_413(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", content=b"x" * (10 * LIMIT))
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"


async def test_chunked_large_body_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * 512

    response = await client.post("/echo", content=chunks())
    assert response.status_code == 413


async def test_body_at_the_limit_passes(client: httpx.AsyncClient) -> None:
    value = "x" * (LIMIT - len('{"value":""}'))
    response = await client.post(
        "/echo",
        content=f'{{"value":"{value}"}}'.encode(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200


async def test_deep_nesting_is_422_before_parsing(client: httpx.AsyncClient) -> None:
    body = b'{"value":' + b"[" * 500 + b"]" * 500 + b"}"
    response = await client.post(
        "/echo", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert "nested" in response.json()["detail"]


async def test_brackets_inside_strings_do_not_count(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", json={"value": "[" * 500 + '\\"{'})
    assert response.status_code == 200


async def test_invalid_json_and_utf8(client: httpx.AsyncClient) -> None:
    headers = {"content-type": "application/json"}
    bad_json = await client.post("/echo", content=b'{"value": ', headers=headers)
    assert bad_json.status_code == 422
    assert bad_json.json()["detail"] == "request body is not valid JSON"
    bad_utf8 = await client.post("/echo", content=b'{"value": "\xff"}', headers=headers)
    assert bad_utf8.status_code == 422


async def test_problem_shapes(client: httpx.AsyncClient) -> None:
    missing = await client.get("/missing")
    assert missing.status_code == 404
    assert missing.json() == {
        "type": "about:blank",
        "title": "Not found",
        "status": 404,
        "detail": "no such thing",
    }
    assert (await client.get("/nowhere")).headers["content-type"] == "application/problem+json"
    assert (await client.delete("/echo")).status_code == 405
    assert (await client.get("/redis")).status_code == 503
    boom = await client.get("/boom")
    assert boom.status_code == 500
    assert "secret internals" not in boom.text


def test_json_depth() -> None:
    assert json_depth(b'{"a": [1, {"b": "[[[["}]}') == 3
    assert json_depth(b'"\\"[["') == 0
