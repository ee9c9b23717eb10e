"""Domain errors, raised below the API layer and mapped to problem+json at the edge.

NotifyhubError
├── AuthenticationError        401  credentials missing, malformed, expired or wrong
├── PermissionDenied           403  valid credentials, wrong scope or tenant
├── NotFound                   404  no such thing (or not yours: never say which)
├── Conflict                   409  the thing is in a state that forbids the change
│   ├── LimitReached           409  one more would pass a per-user limit (`limit` in the problem)
│   └── AlreadyDone            409  it happens once and has (the outcome in the problem)
├── InvalidInput               422  well-formed request that names unknown things
│   ├── IdempotencyMismatch    422  same Idempotency-Key, different body
│   └── BlockedTarget          422  a webhook URL the SSRF guard would always refuse
├── TooLarge                   413  body or collection over a configured limit
├── TooManyRequests            429  rate limit reached (with Retry-After)
│   └── TooManyStreams         429  per-user stream cap reached
└── Unavailable                503  a dependency (Redis, PostgreSQL) is down
"""

from __future__ import annotations


class NotifyhubError(Exception):
    """Base of every error notifyhub raises on purpose."""

    status = 500
    title = "Internal error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def extensions(self) -> dict[str, object] | None:
        """Members the problem+json carries beside the standard ones."""
        return None


class AuthenticationError(NotifyhubError):
    status = 401
    title = "Unauthorized"


class PermissionDenied(NotifyhubError):
    status = 403
    title = "Forbidden"


class NotFound(NotifyhubError):
    status = 404
    title = "Not found"


class Conflict(NotifyhubError):
    status = 409
    title = "Conflict"


class LimitReached(Conflict):
    """One more would pass a limit (say, pinned notifications); the problem names it."""

    title = "Limit reached"

    def __init__(self, detail: str, *, limit: int) -> None:
        super().__init__(detail)
        self.limit = limit

    def extensions(self) -> dict[str, object] | None:
        return {"limit": self.limit}


class AlreadyDone(Conflict):
    """It happens once and has happened (an action completed); the problem says how."""

    title = "Already done"

    def __init__(self, detail: str, **outcome: object) -> None:
        super().__init__(detail)
        self.outcome = outcome

    def extensions(self) -> dict[str, object] | None:
        return dict(self.outcome)


class InvalidInput(NotifyhubError):
    status = 422
    title = "Unprocessable content"


class IdempotencyMismatch(InvalidInput):
    title = "Idempotency-Key reused with a different body"


class BlockedTarget(InvalidInput):
    """A delivery definition's URL points only at addresses webhooks may not reach."""

    title = "Webhook target blocked"


class TooLarge(NotifyhubError):
    status = 413
    title = "Content too large"


class TooManyRequests(NotifyhubError):
    """Over a rate limit; `retry_after_s` (if known) becomes the `Retry-After` header."""

    status = 429
    title = "Too many requests"
    retry_after_s: float | None = None

    def __init__(self, detail: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(detail)
        if retry_after_s is not None:
            self.retry_after_s = retry_after_s


class TooManyStreams(TooManyRequests):
    title = "Too many streams"


class Unavailable(NotifyhubError):
    status = 503
    title = "Service unavailable"
    retry_after_s: float | None = 1.0
