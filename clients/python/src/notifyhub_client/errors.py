"""Errors: every problem+json answer becomes a typed exception carrying its fields.

NotifyhubError                 any failure of a call
├── BadRequest                 400, 413 and other 4xx without a class of their own
│   └── ValidationError        422, with `errors` (field, message, type)
│       └── InvalidArgument    refused by the client before sending (status 0): a wrong
│                              type, an unknown field, a naive datetime
├── Unauthorized               401  missing, expired or wrong credentials
├── Forbidden                  403  wrong scope or tenant
├── NotFound                   404
├── Conflict                   409
├── RateLimited                429  (after the client's retries), `retry_after`
├── Unavailable                503  (after the client's retries), `retry_after`
├── ServerError                other 5xx
└── HubUnreachable             no answer at all (connection errors after the retries)
"""

from __future__ import annotations

import contextlib
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pydantic

from notifyhub_client.models import Problem

BLANK = "about:blank"
"""The problem type that says no more than the status (RFC 9457)."""


class NotifyhubError(Exception):
    """A call failed. `status`, `title`, `detail`, `type` and `errors` are the problem's
    fields (status 0 when the hub never answered)."""

    def __init__(
        self,
        problem: Problem,
        *,
        retry_after: float | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(f"{problem.status} {problem.title}: {problem.detail}")
        self.problem = problem
        self.status = problem.status
        self.title = problem.title
        self.detail = problem.detail
        self.type = problem.type
        self.errors = problem.errors
        self.retry_after = retry_after
        """Seconds the hub asked to wait (`Retry-After`), if it said."""
        self.response = response


class BadRequest(NotifyhubError):
    pass


class ValidationError(BadRequest):
    """422: the hub names each failing field in `errors`."""


class InvalidArgument(ValidationError):
    """An operation's argument the client refused before sending anything (`status` 0):
    `errors` names each failing field as the hub's 422 does, and the pydantic error is
    chained (`__cause__`). A `ValidationError`, so one `except` takes invalid input
    whichever side found it."""

    @classmethod
    def of(cls, error: pydantic.ValidationError, within: str | None = None) -> InvalidArgument:
        """`error` as the client's, its fields named as the caller's argument `within`."""
        errors = [_worded(e, within) for e in error.errors(include_url=False)]
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        title = "Invalid argument"
        return cls(Problem(type=BLANK, title=title, status=0, detail=detail, errors=errors))


NAIVE = "a naive datetime: give its timezone (datetime.now(UTC)); the client does not guess one"


def _worded(error: Any, within: str | None) -> dict[str, str]:
    """One pydantic error as the hub words a field's (`field`, `message`, `type`)."""
    loc = (within, *error["loc"]) if within else error["loc"]
    field = ".".join(str(part) for part in loc) or "(arguments)"
    message = NAIVE if error["type"] == "timezone_aware" else str(error["msg"])
    return {"field": field, "message": message, "type": str(error["type"])}


class Unauthorized(NotifyhubError):
    pass


class Forbidden(NotifyhubError):
    pass


class NotFound(NotifyhubError):
    pass


class Conflict(NotifyhubError):
    pass


class RateLimited(NotifyhubError):
    pass


class Unavailable(NotifyhubError):
    pass


class ServerError(NotifyhubError):
    pass


class UnexpectedAnswer(NotifyhubError):
    """A success the client could not read (not JSON, or not the answer's shape: a hub of
    another version, or something else on its address); `status` is the HTTP status, the
    parsing error is chained (`__cause__`) and `response` kept. The call may have taken
    effect."""

    @classmethod
    def of(cls, error: Exception, response: httpx.Response) -> UnexpectedAnswer:
        if isinstance(error, pydantic.ValidationError):
            errors = [_worded(e, None) for e in error.errors(include_url=False)]
            detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        else:
            errors, detail = [], f"{type(error).__name__}: {error}"
        title = "Unexpected answer"
        problem = Problem(
            type=BLANK, title=title, status=response.status_code, detail=detail, errors=errors
        )
        return cls(problem, response=response)


class HubUnreachable(NotifyhubError):
    """No HTTP answer (refused, reset, timed out), after the retries the call allowed."""

    def __init__(self, error: httpx.TransportError) -> None:
        detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        super().__init__(Problem(type=BLANK, title="Hub unreachable", status=0, detail=detail))


_BY_STATUS: dict[int, type[NotifyhubError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: ValidationError,
    429: RateLimited,
    503: Unavailable,
}


def retry_after(response: httpx.Response) -> float | None:
    """`Retry-After` in seconds (delta-seconds or an HTTP date), None if absent or bad."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    date = response.headers.get("date")
    try:
        now = parsedate_to_datetime(date) if date else None
    except (TypeError, ValueError):
        now = None
    if now is None or when.tzinfo is None or now.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


def _problem(response: httpx.Response) -> Problem:
    body: Any = None
    with contextlib.suppress(ValueError):
        body = response.json()
    if isinstance(body, dict):
        try:
            defaults = {"type": BLANK, "status": response.status_code, "detail": ""}
            return Problem.model_validate({**defaults, **body})
        except pydantic.ValidationError:
            pass
    # Not problem+json (a proxy's page, say): keep the status and the start of the text.
    return Problem(
        type=BLANK,
        title=response.reason_phrase or "HTTP error",
        status=response.status_code,
        detail=response.text[:500],
    )


def error_for(response: httpx.Response) -> NotifyhubError:
    """The typed exception for an error response (its body already read)."""
    status = response.status_code
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else BadRequest
    return cls(_problem(response), retry_after=retry_after(response), response=response)
