"""Every error leaves as RFC 9457 problem+json; dependency outages are 503, never 500."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel, Field
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import create_async_engine

from notifyhub.api.errors import install_error_handlers, problem_response
from notifyhub.errors import AuthenticationError, NotFound, TooManyStreams

CLOSED_PORT = "127.0.0.1:1"


class Recipients(BaseModel):
    users: list[str] = Field(max_length=2)


class Draft(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    recipients: Recipients


class SlowDown(TooManyStreams):
    retry_after_s = 2.5


def _raiser(exc: Exception) -> Any:
    async def handler() -> None:
        raise exc

    return handler


async def _real_postgres_down() -> None:
    engine = create_async_engine(f"postgresql+asyncpg://u:p@{CLOSED_PORT}/db")
    try:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    finally:
        await engine.dispose()


async def _real_redis_down() -> None:
    redis = Redis.from_url(f"redis://{CLOSED_PORT}/0")
    try:
        await redis.ping()
    finally:
        await redis.aclose()


def tiny_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/drafts")
    async def create(draft: Draft) -> dict[str, str]:
        return {"title": draft.title}

    raising = {
        "/missing": NotFound("no such notification"),
        "/unauthorized": AuthenticationError("token expired"),
        "/busy": SlowDown("too many streams for this user"),
        "/boom": RuntimeError("secret internals: password=hunter2"),
        "/redis": RedisConnectionError("Error 111 connecting to redis:6379"),
        "/pg-operational": OperationalError("SELECT 1", {}, Exception("terminated")),
        "/pg-integrity": IntegrityError("INSERT", {}, Exception("duplicate key")),
        "/pg-raw": asyncpg.exceptions.AdminShutdownError("terminating connection"),
        "/refused": ConnectionRefusedError(111, "Connection refused"),
        "/file": FileNotFoundError(2, "No such file", "/etc/secret"),
    }
    for path, exc in raising.items():
        app.get(path)(_raiser(exc))
    app.get("/pg-real")(_real_postgres_down)
    app.get("/redis-real")(_real_redis_down)
    return app


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    # Starlette re-raises after answering a 500 (so servers can log it): don't let the
    # transport turn that into a test failure.
    transport = httpx.ASGITransport(app=tiny_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    problem: dict[str, Any] = response.json()
    assert problem["type"] == "about:blank"
    assert problem["status"] == status
    assert problem["title"] and problem["detail"]
    return problem


async def test_validation_error_names_the_field(client: httpx.AsyncClient) -> None:
    draft = {"title": "x" * 201, "recipients": {"users": ["a", "b", "c"]}}
    problem = _problem(await client.post("/drafts", json=draft), 422)
    fields = [e["field"] for e in problem["errors"]]
    assert fields == ["body.title", "body.recipients.users"]
    assert problem["errors"][0]["type"] == "string_too_long"
    assert problem["detail"].startswith(
        "body.title: String should have at most 200 characters; body.recipients.users:"
    )
    assert "xxxx" not in str(problem)  # never echoes the input


async def test_malformed_json_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/drafts", content=b'{"title": ', headers={"content-type": "application/json"}
    )
    problem = _problem(response, 422)
    where = "invalid JSON at line 1, column 11 (position 10): Expecting value"
    assert problem["detail"] == f"request body is not valid JSON: {where}"
    assert problem["errors"] == [{"field": "body", "message": where, "type": "json_invalid"}]


async def test_domain_error_keeps_status_title_detail(client: httpx.AsyncClient) -> None:
    response = await client.get("/missing")
    assert response.json() == {
        "type": "about:blank",
        "title": "Not found",
        "status": 404,
        "detail": "no such notification",
    }
    unauthorized = await client.get("/unauthorized")
    _problem(unauthorized, 401)
    assert unauthorized.headers["www-authenticate"] == "Bearer"


async def test_retry_after_from_the_error(client: httpx.AsyncClient) -> None:
    response = await client.get("/busy")
    assert _problem(response, 429)["title"] == "Too many streams"
    assert response.headers["retry-after"] == "3"


async def test_unknown_route_and_wrong_method(client: httpx.AsyncClient) -> None:
    missing = _problem(await client.get("/nowhere"), 404)
    assert missing["title"] == "Not found"
    assert "/nowhere" in missing["detail"]
    wrong = await client.delete("/drafts")
    assert _problem(wrong, 405)["title"] == "Method not allowed"
    assert wrong.headers["allow"] == "POST"


async def test_unexpected_error_is_a_generic_500(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="notifyhub.api.errors"):
        response = await client.get("/boom")
    problem = _problem(response, 500)
    assert "secret" not in response.text
    assert "hunter2" not in response.text
    assert "Traceback" not in response.text
    assert problem["detail"] == "an unexpected error occurred; it has been logged"
    logged = [r for r in caplog.records if r.name == "notifyhub.api.errors"]
    assert logged and logged[0].exc_info is not None


async def test_unrelated_os_error_is_500(client: httpx.AsyncClient) -> None:
    response = await client.get("/file")
    _problem(response, 500)
    assert "/etc/secret" not in response.text


@pytest.mark.parametrize(
    ("path", "dependency"),
    [
        ("/redis", "Redis"),
        ("/redis-real", "Redis"),
        ("/pg-operational", "PostgreSQL"),
        ("/pg-raw", "PostgreSQL"),
        ("/pg-real", "PostgreSQL"),
    ],
)
async def test_dependency_outage_is_503(
    client: httpx.AsyncClient, path: str, dependency: str
) -> None:
    response = await client.get(path)
    problem = _problem(response, 503)
    assert problem["detail"] == f"{dependency} is unavailable"
    assert response.headers["retry-after"] == "1"


async def test_raw_connection_refused_is_503(client: httpx.AsyncClient) -> None:
    _problem(await client.get("/refused"), 503)


async def test_database_error_that_is_not_an_outage_is_500(client: httpx.AsyncClient) -> None:
    response = await client.get("/pg-integrity")
    _problem(response, 500)
    assert "duplicate" not in response.text


def test_problem_response_shape() -> None:
    response = problem_response(
        422,
        "Unprocessable content",
        "body.title: too long",
        errors=[{"field": "body.title", "message": "too long", "type": "string_too_long"}],
        headers={"X-Trace": "1"},
    )
    assert response.media_type == "application/problem+json"
    assert response.headers["x-trace"] == "1"
    assert response.status_code == 422
