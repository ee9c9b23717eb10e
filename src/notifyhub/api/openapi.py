"""The OpenAPI document as clients see the API: bearer auth and problem+json errors."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from notifyhub.api.errors import PROBLEM_JSON

PROBLEM_STATUSES = {
    "401": "Missing, malformed, expired or wrong credentials",
    "403": "Valid credentials, wrong scope or tenant",
    "404": "No such thing (or not yours)",
    "409": "The thing is in a state that forbids the change",
    "413": "Request body over the configured limit",
    "422": "Invalid input; `errors` names each failing field",
    "429": "Rate limit or stream cap reached; see `Retry-After`",
    "503": "Redis or PostgreSQL is unavailable; retry shortly",
}
"""What every authenticated (`/v1`) operation may answer besides its success."""

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["field", "message", "type"],
                "properties": {
                    "field": {"type": "string"},
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                },
            },
        },
    },
}
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def _document_operation(operation: dict[str, Any]) -> None:
    operation["security"] = [{"bearer": []}]
    responses: dict[str, Any] = operation.setdefault("responses", {})
    for status, description in PROBLEM_STATUSES.items():
        responses[status] = _problem(description)


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {PROBLEM_JSON: {"schema": _PROBLEM_REF}}}


def document(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the bearer scheme and the problem responses FastAPI cannot infer."""
    components = schema.setdefault("components", {})
    components.setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    components["schemas"].pop("HTTPValidationError", None)
    components["schemas"].pop("ValidationError", None)
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            if path.startswith("/v1/"):
                _document_operation(operation)
            elif "422" in operation.get("responses", {}):  # FastAPI's, not our shape
                operation["responses"]["422"] = _problem(PROBLEM_STATUSES["422"])
    return schema


def install_openapi(app: FastAPI) -> None:
    """Serve the documented schema at `/openapi.json` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            built = get_openapi(title=app.title, version=app.version, routes=app.routes)
            app.openapi_schema = document(built)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
