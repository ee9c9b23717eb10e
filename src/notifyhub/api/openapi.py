"""The OpenAPI document as clients see the API: bearer auth and problem+json errors.

Each router declares the problems its operations answer with `problems(...)` maps:
`USER` (user-token routes: 401, 429, 503), `SERVICE` (API-key routes: also 403), and per
operation `NOT_FOUND` and `CONFLICT`. `document` adds what follows from the request itself:
413 and 422 for a method that carries a body (the body limits apply to every one), 422
wherever FastAPI validates parameters."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, get_args

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel
from starlette.routing import BaseRoute

from notifyhub.api.deps import CurrentUser, require, stream_user
from notifyhub.api.errors import PROBLEM_JSON, PROBLEM_TYPE
from notifyhub.api.schemas.stream import (
    StreamCounts,
    StreamDelete,
    StreamNotification,
    StreamUpdate,
)
from notifyhub.domain.auth import Scope

PROBLEM_STATUSES = {
    401: ("Unauthorized", "Missing, malformed, expired or wrong credentials"),
    403: ("Forbidden", "Valid credentials, wrong scope or tenant"),
    404: ("Not found", "No such thing (or not yours)"),
    409: ("Conflict", "The thing is in a state that forbids the change"),
    413: ("Content too large", "Request body over the configured limit"),
    422: ("Unprocessable content", "Invalid input; `errors` names each failing field"),
    429: ("Too many requests", "Rate limit or stream cap reached; see `Retry-After`"),
    503: ("Service unavailable", "Redis or PostgreSQL is unavailable; retry shortly"),
}
"""The problems an operation may answer: title, and when."""
_EXAMPLE_DETAILS = {
    401: "the bearer token has expired",
    403: "this API key lacks the `admin` scope",
    404: "no group replenishers in tenant default",
    409: "the message is already reserved, consumed or cancelled",
    413: "the body is over 1048576 bytes",
    422: "1 invalid field",
    429: "rate limit reached; retry after 1 s",
    503: "Redis is unavailable",
}
BODY_METHODS = frozenset({"post", "put", "patch", "delete"})
"""Methods whose body the request limits check (413, and 422 for bad JSON)."""

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An RFC 9457 problem.",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "description": "Always `about:blank`."},
        "title": {"type": "string", "description": "The status's short name."},
        "status": {"type": "integer", "description": "The HTTP status."},
        "detail": {"type": "string", "description": "What went wrong, for people."},
        "errors": {
            "type": "array",
            "description": "With 422: each failing field (never its value).",
            "items": {
                "type": "object",
                "required": ["field", "message", "type"],
                "properties": {
                    "field": {"type": "string", "description": "Where, dotted."},
                    "message": {"type": "string", "description": "What is wrong."},
                    "type": {"type": "string", "description": "The kind of error."},
                },
            },
        },
    },
    "examples": [
        {
            "type": PROBLEM_TYPE,
            "title": "Unprocessable content",
            "status": 422,
            "detail": "1 invalid field",
            "errors": [
                {
                    "field": "body.title",
                    "message": "String should have at least 1 character",
                    "type": "string_too_short",
                }
            ],
        }
    ],
}
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
STREAM_EVENTS: dict[str, tuple[str, str]] = {
    "notification": (
        "StreamNotification",
        "a new notification (or one replacing another: `replaces`; a snoozed one back: "
        "`resurfaced`)",
    ),
    "update": (
        "StreamUpdate",
        "a notification's state changed (read, seen, archived, pinned, snoozed, an action "
        "completed), or an activity joined its thread (`thread` set: the whole item)",
    ),
    "delete": ("StreamDelete", "a notification left the inbox"),
    "counts": ("StreamCounts", "the counts after every change, and first on a new stream"),
    "reset": ("StreamCounts", "the missed changes are gone: reload the list"),
}
"""Each event the stream sends: the schema of its `data`, and when it comes."""


def _problem(status: int, description: str | None = None) -> dict[str, Any]:
    title, when = PROBLEM_STATUSES[status]
    example = {"type": PROBLEM_TYPE, "title": title, "status": status}
    example["detail"] = _EXAMPLE_DETAILS[status]
    if status == 422:
        example = PROBLEM_SCHEMA["examples"][0]
    content = {PROBLEM_JSON: {"schema": _PROBLEM_REF, "example": example}}
    return {"description": description or when, "content": content}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A `responses=` map of problem+json answers."""
    return {status: _problem(status) for status in statuses}


USER = problems(401, 429, 503)
"""What every user-token operation may answer."""
SERVICE = problems(401, 403, 429, 503)
"""What every API-key operation may answer (403: a scope or tenant the key lacks)."""
NOT_FOUND = problems(404)
CONFLICT = problems(409)


def _document_operation(method: str, operation: dict[str, Any]) -> None:
    operation["security"] = [{"bearer": []}]
    responses: dict[str, Any] = operation.setdefault("responses", {})
    if method in BODY_METHODS:
        responses["413"] = _problem(413)
        responses["422"] = _problem(422)


def _stream_components() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for model in (StreamNotification, StreamUpdate, StreamDelete, StreamCounts):
        schema = model.model_json_schema(
            ref_template="#/components/schemas/{model}", mode="serialization"
        )
        found |= schema.pop("$defs", {})  # the models it refers to (StreamViewCount, Thread)
        found[model.__name__] = schema
    return found


def _add_stream_components(schemas: dict[str, Any]) -> None:
    """The stream events' schemas, and the models they refer to that FastAPI's document
    lacks: one it has (Actor, Thread: the items refer to them too) is kept as FastAPI
    wrote it."""
    for name, schema in _stream_components().items():
        schemas.setdefault(name, schema)


def _our_models(base: type[BaseModel] = BaseModel) -> Iterator[type[BaseModel]]:
    for model in base.__subclasses__():
        if model.__module__.startswith("notifyhub."):
            yield model
        yield from _our_models(model)


def _restore_examples(schemas: dict[str, Any]) -> None:
    """Put back the `null`s of the models' examples: FastAPI encodes the document without
    None values, which would leave a required nullable field out of its own example."""
    for model in set(_our_models()):
        extra = model.model_config.get("json_schema_extra")
        schema = schemas.get(model.__name__)
        if (
            isinstance(extra, dict)
            and schema is not None
            and "examples" in schema
            and schema.get("title") == model.__name__
        ):
            schema["examples"] = extra["examples"]


def document(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the bearer scheme, the problems the request's shape implies and the stream's
    event schemas: what FastAPI cannot infer."""
    components = schema.setdefault("components", {})
    components.setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    _add_stream_components(components["schemas"])
    _restore_examples(components["schemas"])
    components["schemas"].pop("HTTPValidationError", None)
    components["schemas"].pop("ValidationError", None)
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            if path.startswith("/v1/"):
                _document_operation(method, operation)
            if "422" in operation.get("responses", {}):  # FastAPI's, not our shape
                operation["responses"]["422"] = _problem(422)
    return schema


def _callers() -> dict[Callable[..., Any], str]:
    """Who each authenticating dependency admits, as `x-caller` and the docs say it."""
    found: dict[Callable[..., Any], str] = {
        require(scope): f"an API key with the `{scope}` scope" for scope in Scope
    }
    found[require(Scope.ADMIN)] = "an API key with the `admin` scope"
    for scope in (Scope.PUBLISH, Scope.CONSUME):
        found[require(scope)] += " (or `admin`)"
    found[get_args(CurrentUser)[1].dependency] = "a user token (JWT)"
    found[stream_user] = "a user token (JWT), or a stream token in `?access_token=`"
    return found


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for dependency in dependant.dependencies:
        if dependency.call is not None:
            yield dependency.call
        yield from _calls(dependency)


def document_callers(schema: dict[str, Any], routes: Sequence[BaseRoute]) -> None:
    """Name who may call each authenticated operation (`x-caller`, and its description's
    first line), from the dependency that authenticates it."""
    callers = _callers()
    for context in iter_route_contexts(routes):  # as get_openapi walks included routers
        route = context.original_route
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        caller = next((callers[c] for c in _calls(route.dependant) if c in callers), None)
        if caller is None:
            continue
        for method in route.methods or ():
            operation = schema["paths"][context.path_format or route.path_format][method.lower()]
            operation["x-caller"] = caller
            described = operation.get("description", "")
            operation["description"] = f"Caller: {caller}.\n\n{described}".strip()


def install_openapi(app: FastAPI) -> None:
    """Serve the documented schema at `/openapi.json` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            built = get_openapi(title=app.title, version=app.version, routes=app.routes)
            document_callers(built, app.routes)
            app.openapi_schema = document(built)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
