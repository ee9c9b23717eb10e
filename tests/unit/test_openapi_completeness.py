"""The OpenAPI document explains itself: every operation has a typed success, every
request body and answer an example valid against its own schema, every model and every
field users set a description, every parameter a description and an example."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from notifyhub.api.app import create_app
from notifyhub.settings import Settings

TEXT_TYPES = {"text/event-stream", "text/plain"}
REF = "#/components/schemas/"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    offline = Settings(
        redis_url="redis://unused",
        database_url="postgresql+asyncpg://unused/unused",
        jwt_secret="x" * 32,  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
    )
    return create_app(offline).openapi()


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            yield f"{method.upper()} {path}", operation


def _name(schema: dict[str, Any]) -> str | None:
    """The model a schema names, also as `anyOf: [model, null]` (an optional body)."""
    refs = [s for s in schema.get("anyOf", []) if s.get("type") != "null"] or [schema]
    ref = refs[0].get("$ref", "") if len(refs) == 1 else ""
    return ref.removeprefix(REF) if ref.startswith(REF) else None


def _request_models(document: dict[str, Any]) -> set[str]:
    found = set()
    for _, operation in _operations(document):
        content = operation.get("requestBody", {}).get("content", {})
        for body in content.values():
            if (name := _name(body["schema"])) is not None:
                found.add(name)
    return found


def _answers(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(operation, status, media type object) of every JSON answer."""
    for where, operation in _operations(document):
        for status, response in operation["responses"].items():
            for media_type, body in response.get("content", {}).items():
                if media_type not in TEXT_TYPES:
                    yield where, status, body


def _nested(document: dict[str, Any], schema: Any) -> Iterator[str]:
    """Names of the models `schema` refers to, at any depth."""
    if isinstance(schema, dict):
        if (name := _name(schema)) is not None:
            yield name
        for value in schema.values():
            yield from _nested(document, value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _nested(document, value)


def _closure(document: dict[str, Any], names: set[str]) -> set[str]:
    schemas = document["components"]["schemas"]
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_nested(document, schemas[name]))
    return seen


def missing_successes(document: dict[str, Any]) -> list[str]:
    """Operations without a 2xx, or with a 2xx (204 excepted) without a schema."""
    missing = []
    for where, operation in _operations(document):
        successes = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
        if not successes:
            missing.append(f"{where}: no 2xx")
        for status, response in successes.items():
            content = response.get("content", {})
            if status != "204" and not any(b.get("schema") for b in content.values()):
                missing.append(f"{where} {status}: no schema")
    return missing


def missing_examples(document: dict[str, Any]) -> list[str]:
    """Request bodies and answers whose schema (or media type) carries no example."""
    schemas = document["components"]["schemas"]
    missing = []
    for where, operation in _operations(document):
        for body in operation.get("requestBody", {}).get("content", {}).values():
            name = _name(body["schema"])
            if name is None or not schemas[name].get("examples"):
                missing.append(f"{where} request: {name or 'inline schema'}")
    for where, status, body in _answers(document):
        name = _name(body.get("schema", {}))
        has = "example" in body or (name is not None and schemas[name].get("examples"))
        if not has:
            missing.append(f"{where} {status}: {name or 'inline schema'}")
    return missing


def missing_descriptions(document: dict[str, Any]) -> list[str]:
    """Models without a description, fields of request models without one, parameters
    without a description or an example."""
    schemas = document["components"]["schemas"]
    requests = _closure(document, _request_models(document))
    answers = _closure(
        document, {n for _, _, b in _answers(document) if (n := _name(b.get("schema", {})))}
    )
    missing = []
    for name in sorted(requests | answers):
        schema = schemas[name]
        if schema.get("type") == "object" and not schema.get("description"):
            missing.append(f"model {name}")
        if name in requests:
            missing.extend(
                f"{name}.{field}"
                for field, prop in schema.get("properties", {}).items()
                if not prop.get("description")
            )
    for where, operation in _operations(document):
        for parameter in operation.get("parameters", []):
            examples = parameter["schema"].get("examples") or parameter.get("example")
            if not parameter.get("description") or not examples:
                missing.append(f"{where} parameter {parameter['name']}")
    return missing


def test_every_operation_has_a_typed_success(document: dict[str, Any]) -> None:
    assert missing_successes(document) == []


def test_every_request_body_and_answer_has_an_example(document: dict[str, Any]) -> None:
    assert missing_examples(document) == []


def test_every_model_field_users_set_and_parameter_is_described(
    document: dict[str, Any],
) -> None:
    assert missing_descriptions(document) == []


def test_every_example_is_valid_against_its_own_schema(document: dict[str, Any]) -> None:
    """Schemathesis sends the examples: they must pass the schema they illustrate."""
    components = {"components": document["components"]}
    invalid = []
    for name, schema in document["components"]["schemas"].items():
        validator = Draft202012Validator({"$ref": REF + name, **components})
        for example in schema.get("examples", []):
            invalid.extend(f"{name}: {e.message}" for e in validator.iter_errors(example))
    for where, status, body in _answers(document):
        if "example" in body:
            validator = Draft202012Validator({**body["schema"], **components})
            invalid.extend(
                f"{where} {status}: {e.message}" for e in validator.iter_errors(body["example"])
            )
    for where, operation in _operations(document):
        for parameter in operation.get("parameters", []):
            validator = Draft202012Validator(parameter["schema"])
            for example in parameter["schema"].get("examples", []):
                invalid.extend(
                    f"{where} {parameter['name']}: {e.message}"
                    for e in validator.iter_errors(example)
                )
    assert invalid == []


def test_the_stream_documents_each_event(document: dict[str, Any]) -> None:
    response = document["paths"]["/v1/me/stream"]["get"]["responses"]["200"]
    body = response["content"]["text/event-stream"]
    events = body["schema"]["x-sse-events"]
    assert set(events) == {"notification", "update", "delete", "counts", "reset"}
    for name, schema in events.items():
        assert schema["$ref"].removeprefix(REF) in document["components"]["schemas"], name
        assert f"`{name}`" in response["description"], name
    for wire in ("id: <seq>-<epoch>", "retry:", ": ping"):
        assert wire in response["description"] + body["example"], wire


def test_the_checks_catch_what_is_missing() -> None:
    bare = {
        "paths": {
            "/x": {
                "post": {
                    "requestBody": {
                        "content": {"application/json": {"schema": {"$ref": REF + "In"}}}
                    },
                    "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "OK"}},
                }
            }
        },
        "components": {
            "schemas": {"In": {"type": "object", "properties": {"a": {"type": "string"}}}}
        },
    }
    assert missing_successes(bare) == ["POST /x 200: no schema"]
    assert missing_examples(bare) == ["POST /x request: In"]
    assert missing_descriptions(bare) == ["model In", "In.a", "POST /x parameter q"]
