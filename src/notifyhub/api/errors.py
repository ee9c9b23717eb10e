"""The one mapping from errors to RFC 9457 problem+json responses."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from notifyhub.errors import NotifyhubError

log = logging.getLogger(__name__)

PROBLEM = "application/problem+json"


def problem_response(
    status: int,
    title: str,
    detail: str,
    *,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM, headers=headers)


def _field(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc)


def _validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    return [
        {
            "field": _field(e.get("loc", ())),
            "message": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in exc.errors()
    ]


async def _validation(request: Request, exc: RequestValidationError) -> Response:
    errors = _validation_errors(exc)
    if any(e["type"] == "json_invalid" for e in errors):
        return problem_response(
            422, "Unprocessable content", "request body is not valid JSON", errors=errors
        )
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5])
    return problem_response(
        422, "Unprocessable content", detail or "invalid request", errors=errors
    )


async def _domain(request: Request, exc: NotifyhubError) -> Response:
    retry_after = getattr(exc, "retry_after_s", None)
    headers = {"Retry-After": str(int(retry_after))} if retry_after else None
    if exc.status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return problem_response(exc.status, exc.title, exc.detail, headers=headers)


async def _http(request: Request, exc: StarletteHTTPException) -> Response:
    titles = {404: "Not found", 405: "Method not allowed"}
    return problem_response(
        exc.status_code,
        titles.get(exc.status_code, "HTTP error"),
        str(exc.detail),
        headers=dict(exc.headers) if exc.headers else None,
    )


async def _redis_down(request: Request, exc: Exception) -> Response:
    log.warning("Redis unavailable: %s", exc)
    return problem_response(
        503, "Service unavailable", "Redis is unavailable", headers={"Retry-After": "1"}
    )


async def _postgres_down(request: Request, exc: Exception) -> Response:
    if (
        isinstance(exc, DBAPIError)
        and not exc.connection_invalidated
        and not isinstance(exc, OperationalError | InterfaceError)
    ):
        return await _unexpected(request, exc)
    log.warning("PostgreSQL unavailable: %s", exc)
    return problem_response(
        503, "Service unavailable", "PostgreSQL is unavailable", headers={"Retry-After": "1"}
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(
        500, "Internal error", "an unexpected error occurred; it has been logged"
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(NotifyhubError, _domain)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    for redis_error in (RedisConnectionError, RedisTimeoutError):
        app.add_exception_handler(redis_error, _redis_down)
    for pg_error in (DBAPIError, ConnectionRefusedError, OSError):
        app.add_exception_handler(pg_error, _postgres_down)
    app.add_exception_handler(Exception, _unexpected)
