"""Starlette's CORS middleware, answering a refused preflight as problem+json.

Starlette answers a preflight it refuses with `400 text/plain` "Disallowed CORS origin";
every other error of the hub is RFC 9457 problem+json, and a front-end developer wants
to know which origin, method or header was refused.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from notifyhub.api.errors import problem_response

_KEPT = ("access-control-", "vary")
"""The refusal keeps Starlette's CORS headers, not its plain-text body's."""


class ProblemCORSMiddleware(CORSMiddleware):
    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code != 400:
            return response
        failures = bytes(response.body).decode().removeprefix("Disallowed CORS ").split(", ")
        detail = "CORS preflight refused: " + "; ".join(
            self._explain(failure, request_headers) for failure in failures
        )
        headers = {k: v for k, v in response.headers.items() if k.lower().startswith(_KEPT)}
        return problem_response(400, "Bad request", detail, headers=headers)

    def _explain(self, failure: str, request_headers: Headers) -> str:
        if failure == "origin":
            return f"origin {request_headers['origin']} is not allowed"
        if failure == "method":
            allowed = ", ".join(self.allow_methods)
            method = request_headers["access-control-request-method"]
            return f"method {method} is not allowed (allowed: {allowed})"
        if failure == "headers":
            return "a requested header is not allowed"
        return f"{failure} is not allowed"
