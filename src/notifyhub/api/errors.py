"""The one mapping from errors to RFC 9457 problem+json responses."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import DBAPIError
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
from notifyhub.metrics import Metrics
from notifyhub.outages import NAMES, POSTGRES_OUTAGES, REDIS_OUTAGES, Dependency, outage_of

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
PROBLEM_TYPE = "about:blank"
"""Our one convention: the status code says what kind of problem it is."""

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
    extensions: dict[str, object] | None = None,
) -> Response:
    """An `application/problem+json` response with `type`, `title`, `status`, `detail`
    (and RFC 9457 extension members, such as a `limit` reached)."""
    body: dict[str, object] = {
        "type": PROBLEM_TYPE,
        "title": title,
        "status": status,
        "detail": detail,
        **(extensions or {}),
    }
    if errors is not None:
        body["errors"] = errors
    return Response(
        orjson.dumps(body), status_code=status, media_type=PROBLEM_JSON, headers=headers
    )


def unavailable(dependency: Dependency | None, metrics: Metrics | None = None) -> Response:
    """503 for a store's outage, naming it (None: a connection refused by we know not
    whom); clients may retry shortly. Counted by dependency when `metrics` is given."""
    if metrics is not None:
        metrics.http_unavailable_total.labels(dependency=dependency or "other").inc()
    name = NAMES[dependency] if dependency is not None else "A backing service"
    return problem_response(
        Unavailable.status,
        Unavailable.title,
        f"{name} is unavailable",
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
    return problem_response(
        exc.status, exc.title, exc.detail, headers=headers or None, extensions=exc.extensions()
    )


def _field(loc: Sequence[object]) -> str:
    return ".".join(str(part) for part in loc)


def _validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    """Field, message and type of each error; never the offending input itself."""
    return [_worded(error, exc.body) for error in exc.errors()]


def _worded(error: dict[str, Any], body: Any) -> dict[str, str]:
    """One error in the words a client needs: a text's length in characters, a JSON
    syntax error's place (not a field), a body that is not a JSON object."""
    loc, kind, message = tuple(error.get("loc", ())), str(error.get("type", "")), error.get("msg")
    ctx = error.get("ctx") or {}
    if kind == "json_invalid" and len(loc) == 2 and isinstance(loc[1], int):
        return {"field": "body", "message": _json_place(body, loc[1], ctx), "type": kind}
    if kind in ("too_long", "too_short") and isinstance(error.get("input"), str):
        bound = "most" if kind == "too_long" else "least"
        limit = ctx.get("max_length" if kind == "too_long" else "min_length")
        actual = ctx.get("actual_length", len(error["input"]))
        message = f"String should have at {bound} {limit} characters, not {actual}"
        kind = f"string_{kind}"
    elif loc == ("body",) and kind in ("model_attributes_type", "dict_type"):
        message = "the body must be a JSON object (sent with Content-Type: application/json)"
    return {"field": _field(loc), "message": str(message or ""), "type": kind}


def _json_place(body: Any, position: int, ctx: dict[str, Any]) -> str:
    """`invalid JSON at line L, column C (position N): why`, from the document parsed."""
    text = body if isinstance(body, str) else ""
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    why = f": {ctx['error']}" if ctx.get("error") else ""
    return f"invalid JSON at line {line}, column {column} (position {position}){why}"


def _validation_detail(errors: list[dict[str, str]]) -> str:
    """Name the first failing fields in plain words: `body.title: String should ...`."""
    shown = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:_MAX_DETAIL_FIELDS])
    more = len(errors) - _MAX_DETAIL_FIELDS
    return f"{shown} (and {more} more)" if more > 0 else shown or "invalid request"


async def _validation(request: Request, exc: RequestValidationError) -> Response:
    errors = _validation_errors(exc)
    invalid_json = [e for e in errors if e["type"] == "json_invalid"]
    if invalid_json:
        detail = f"request body is not valid JSON: {invalid_json[0]['message']}"
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


def unreadable_body(exc: StarletteHTTPException) -> str | None:
    """Why FastAPI's JSON parser refused a body with a ValueError that is no syntax error
    (a number past Python's int-from-string limit of 4300 digits), which it answers 400
    "There was an error parsing the body"; None for any other HTTP error. Invalid JSON to
    the client (422), as any other body `json.loads` refuses."""
    if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
        return str(exc.__cause__).split(";")[0]
    return None


async def _http(request: Request, exc: StarletteHTTPException) -> Response:
    if (why := unreadable_body(exc)) is not None:
        error = {"field": "body", "message": why, "type": "json_invalid"}
        detail = f"request body is not valid JSON: {why}"
        return problem_response(InvalidInput.status, InvalidInput.title, detail, errors=[error])
    return problem_response(
        exc.status_code,
        _title(exc.status_code),
        _http_detail(request, exc),
        headers=dict(exc.headers) if exc.headers else None,
    )


def _metrics(request: Request) -> Metrics | None:
    state = request.scope.get("state") or {}
    metrics = state.get("metrics")
    return metrics if isinstance(metrics, Metrics) else None


async def _outage(request: Request, exc: Exception) -> Response:
    """A Redis or PostgreSQL outage is a 503 naming it; any other error here is a bug."""
    dependency = outage_of(exc)
    if dependency is None and not isinstance(exc, ConnectionError):
        return await _unexpected(request, exc)
    name = NAMES[dependency] if dependency is not None else "A backing service"
    log.warning("%s unavailable on %s %s: %r", name, request.method, request.url.path, exc)
    return unavailable(dependency, _metrics(request))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(
        500, "Internal error", "an unexpected error occurred; it has been logged"
    )


Handler = Callable[[Request, Any], Awaitable[Response]]

_HANDLERS: dict[type[Exception], Handler] = {
    RequestValidationError: _validation,
    NotifyhubError: _domain,
    StarletteHTTPException: _http,
    # OSError: raw socket errors and timeouts (asyncpg's, which SQLAlchemy does not wrap).
    **dict.fromkeys((*REDIS_OUTAGES, *POSTGRES_OUTAGES, DBAPIError, OSError), _outage),
    RuntimeError: _outage,  # a Redis connection uvloop had closed (outages.py); else a bug
    AttributeError: _outage,  # a Redis Cluster client's slot map mid-change; else a bug
    Exception: _unexpected,
}
"""Every error's answer, by class: the app's exception handlers, and what the hot routes
(api/fastpath.py) answer with (`problem_for`)."""


def _handler_for(exc: Exception) -> Handler:
    """The nearest class's handler, as Starlette looks one up."""
    for cls in type(exc).__mro__:
        handler = _HANDLERS.get(cls)
        if handler is not None:
            return handler
    return _unexpected


async def problem_for(request: Request, exc: Exception) -> Response:
    """The problem+json answer to `exc`, exactly as the app's handlers answer it."""
    return await _handler_for(exc)(request, exc)


def install_error_handlers(app: FastAPI) -> None:
    """Map every error to problem+json; dependency outages are 503, never 500."""
    for cls, handler in _HANDLERS.items():
        app.add_exception_handler(cls, handler)
