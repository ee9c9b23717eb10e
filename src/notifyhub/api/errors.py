"""The one mapping from errors to RFC 9457 problem+json responses."""

from __future__ import annotations

import logging
import math
import traceback
from collections.abc import Iterator, Sequence
from http import HTTPStatus

import asyncpg
import orjson
import redis.exceptions as redis_errors
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from notifyhub.errors import (
    AuthenticationError,
    Conflict,
    InvalidInput,
    NotFound,
    NotifyhubError,
    PermissionDenied,
    TooLarge,
    TooManyRequests,
    TooManyStreams,
    Unavailable,
)

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
PROBLEM_TYPE = "about:blank"
"""Our one convention: the status code says what kind of problem it is."""

REDIS_OUTAGES: tuple[type[Exception], ...] = (
    redis_errors.ConnectionError,  # also BusyLoading, MaxConnections, Authentication
    redis_errors.TimeoutError,
    redis_errors.ReadOnlyError,  # a replica during failover
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
    redis_errors.OutOfMemoryError,  # maxmemory reached with noeviction
)
POSTGRES_OUTAGES: tuple[type[Exception], ...] = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
)
_DRIVERS = {"redis": "Redis", "asyncpg": "PostgreSQL", "sqlalchemy": "PostgreSQL"}
_MAX_DETAIL_FIELDS = 3
_TITLES = {
    error.status: error.title
    for error in (
        AuthenticationError,
        PermissionDenied,
        NotFound,
        Conflict,
        InvalidInput,
        TooLarge,
        TooManyStreams,
        TooManyRequests,
        Unavailable,
    )
}


def problem_response(
    status: int,
    title: str,
    detail: str,
    *,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """An `application/problem+json` response with `type`, `title`, `status`, `detail`."""
    body: dict[str, object] = {
        "type": PROBLEM_TYPE,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    return Response(
        orjson.dumps(body), status_code=status, media_type=PROBLEM_JSON, headers=headers
    )


def unavailable(dependency: str) -> Response:
    """503 for a dependency outage: clients may retry shortly."""
    return problem_response(
        Unavailable.status,
        Unavailable.title,
        f"{dependency} is unavailable",
        headers={"Retry-After": "1"},
    )


async def _domain(request: Request, exc: NotifyhubError) -> Response:
    return domain_problem(exc)


def domain_problem(exc: NotifyhubError) -> Response:
    """The problem+json response for a domain error (with Retry-After/WWW-Authenticate)."""
    headers: dict[str, str] = {}
    retry_after_s = getattr(exc, "retry_after_s", None)
    if isinstance(retry_after_s, int | float) and retry_after_s > 0:
        headers["Retry-After"] = str(math.ceil(retry_after_s))
    if exc.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return problem_response(exc.status, exc.title, exc.detail, headers=headers or None)


def _field(loc: Sequence[object]) -> str:
    return ".".join(str(part) for part in loc)


def _validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    """Field, message and type of each error; never the offending input itself."""
    return [
        {
            "field": _field(error.get("loc", ())),
            "message": str(error.get("msg", "")),
            "type": str(error.get("type", "")),
        }
        for error in exc.errors()
    ]


def _validation_detail(errors: list[dict[str, str]]) -> str:
    """Name the first failing fields in plain words: `body.title: String should ...`."""
    shown = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:_MAX_DETAIL_FIELDS])
    more = len(errors) - _MAX_DETAIL_FIELDS
    return f"{shown} (and {more} more)" if more > 0 else shown or "invalid request"


async def _validation(request: Request, exc: RequestValidationError) -> Response:
    errors = _validation_errors(exc)
    if any(e["type"] == "json_invalid" for e in errors):
        detail = "request body is not valid JSON"
    else:
        detail = _validation_detail(errors)
    return problem_response(InvalidInput.status, InvalidInput.title, detail, errors=errors)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "HTTP error"


def _title(status: int) -> str:
    """Our domain errors' title for this status if any, else its phrase, sentence-cased."""
    phrase = _phrase(status)
    return _TITLES.get(status, phrase[:1] + phrase[1:].lower())


def _http_detail(request: Request, exc: StarletteHTTPException) -> str:
    """Starlette's default detail only repeats the status phrase; say something useful."""
    if exc.detail != _phrase(exc.status_code):
        return str(exc.detail)
    if exc.status_code == 404:
        return f"no resource at {request.url.path}"
    if exc.status_code == 405:
        return f"{request.method} is not allowed on {request.url.path}"
    return str(exc.detail)


async def _http(request: Request, exc: StarletteHTTPException) -> Response:
    return problem_response(
        exc.status_code,
        _title(exc.status_code),
        _http_detail(request, exc),
        headers=dict(exc.headers) if exc.headers else None,
    )


async def _redis_down(request: Request, exc: Exception) -> Response:
    log.warning("Redis unavailable on %s %s: %r", request.method, request.url.path, exc)
    return unavailable("Redis")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, the DBAPI error it wraps, and their causes (cycle-safe)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        wrapped = orig if isinstance(orig, BaseException) else None
        todo += [wrapped, current.__cause__, current.__context__]


def _is_connection_failure(exc: DBAPIError) -> bool:
    if exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError):
        return True
    return any(isinstance(e, (*POSTGRES_OUTAGES, OSError)) for e in _chain(exc))


async def _database_error(request: Request, exc: DBAPIError) -> Response:
    if not _is_connection_failure(exc):
        return await _unexpected(request, exc)
    log.warning("PostgreSQL unavailable on %s %s: %r", request.method, request.url.path, exc)
    return unavailable("PostgreSQL")


async def _postgres_down(request: Request, exc: Exception) -> Response:
    log.warning("PostgreSQL unavailable on %s %s: %r", request.method, request.url.path, exc)
    return unavailable("PostgreSQL")


def _raised_by(exc: BaseException) -> str | None:
    """Which dependency's driver raised this (the innermost driver frame wins)."""
    found = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        package = str(frame.f_globals.get("__name__", "")).partition(".")[0]
        found = _DRIVERS.get(package, found)
    return found


async def _os_error(request: Request, exc: OSError) -> Response:
    """Raw socket errors: asyncpg's connect (SQLAlchemy does not wrap them) and alike."""
    dependency = _raised_by(exc)
    if dependency is None and isinstance(exc, ConnectionError):
        dependency = "A backing service"
    if dependency is None:
        return await _unexpected(request, exc)
    log.warning("%s unavailable on %s %s: %r", dependency, request.method, request.url.path, exc)
    return unavailable(dependency)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(
        500, "Internal error", "an unexpected error occurred; it has been logged"
    )


def install_error_handlers(app: FastAPI) -> None:
    """Map every error to problem+json; dependency outages are 503, never 500."""
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(NotifyhubError, _domain)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    for redis_error in REDIS_OUTAGES:
        app.add_exception_handler(redis_error, _redis_down)
    for postgres_error in (*POSTGRES_OUTAGES, PoolTimeoutError):
        app.add_exception_handler(postgres_error, _postgres_down)
    app.add_exception_handler(DBAPIError, _database_error)  # type: ignore[arg-type]
    app.add_exception_handler(OSError, _os_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)
