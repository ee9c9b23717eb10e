"""The OpenAPI document explains itself: every operation has a typed success, every
request body and answer an example valid against its own schema, every model and every
field users set a description, every parameter a description and an example."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from notifyhub.api.app import create_app
from notifyhub.domain.notification import Action, Actor, Notification, Ref
from notifyhub.realtime.sse import change_frame
from notifyhub.settings import Settings
from notifyhub.store.changes import Change, decode_entry

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


def _framed(entry: dict[str, Any], content: bytes | None, state: bytes | None) -> tuple[str, Any]:
    """The event and data the stream sends for a change-log entry."""
    logged = decode_entry(orjson.dumps({"counts": {"unread": 1, "unseen": 1, "total": 1}, **entry}))
    sent = change_frame(Change(logged, content, state), "e")
    assert sent is not None
    head, _, data = sent.partition(b"\ndata: ")
    return head.decode().removeprefix("event: ").split("\n")[0], orjson.loads(data)


def test_the_stream_events_data_is_what_their_schemas_say(document: dict[str, Any]) -> None:
    """Every kind of event the stream sends (a state update, an action's completion, a
    thread's update carrying the whole item, a new, replacing and resurfaced notification,
    a delete) is valid against its event's schema, with no field the schema lacks: a
    client built from the document reads all of it (an `update` once documented only the
    read state)."""
    at = 1_700_000_000_123
    sent = Notification(
        id="01JD3Q4M6T9W2Z8K5N7R1C0B3X",
        tenant="default",
        title="Bo commented",
        body="**Hi**",
        body_format="markdown",
        category="comment",
        source="blog",
        data={"post": "p1"},
        action_url="/posts/p1",
        actor=Actor(type="user", id="bo", name="Bo"),
        target=Ref(type="post", id="p1"),
        created_at=at,
        expires_at=at + 60_000,
        collapse_key=None,
        tags=("comments",),
        actions=(Action(id="ok", label="OK"),),
        thread_key="post:p1",
        thread_window_s=3600,
    ).content_json()
    summary = {"id": "01JD3Q3Z", "key": "post:p1", "count": 2, "first_ms": at, "last_ms": at}
    actors = [{"type": "user", "id": "bo", "name": "Bo"}, {"type": "user", "id": "ana"}]
    thread = orjson.dumps({"thread": {**summary, "actors": actors}, **orjson.loads(sent)})
    state, flags = b"0|0|comment|", b"0|1|comment|\x1fapc1@1700000000123"
    update = {"type": "update", "seq": 2, "id": "n1", "read_at": at, "seen": True}
    events = [
        _framed(update, None, None),
        _framed({**update, "archived": 1, "pinned": 1, "snoozed": at}, None, None),
        _framed({**update, "action": "ok", "completed": f"1@{at}"}, None, None),
        _framed({"type": "update", "seq": 3, "id": "t1", "thread": 1}, thread, flags),
        _framed({"type": "notification", "seq": 4, "id": "n2"}, sent, state),
        _framed({"type": "notification", "seq": 5, "id": "n2", "replaces": "n0"}, sent, state),
        _framed({"type": "notification", "seq": 6, "id": "n2", "resurfaced": 1}, sent, state),
        _framed({"type": "delete", "seq": 7, "id": "n2"}, None, None),
    ]
    assert events[3][1]["thread"]["activity_count"] == 2  # the whole item, framed
    stream = document["paths"]["/v1/me/stream"]["get"]["responses"]["200"]["content"]
    schemas = stream["text/event-stream"]["schema"]["x-sse-events"]
    components = {"components": document["components"]}
    wrong = []
    for event, data in events:
        name = schemas[event]["$ref"].removeprefix(REF)
        validator = Draft202012Validator({"$ref": REF + name, **components})
        wrong += [f"{event}: {e.message}" for e in validator.iter_errors(data)]
        properties = document["components"]["schemas"][name]["properties"]
        wrong += [f"{event}: {field} not in {name}" for field in set(data) - set(properties)]
    assert wrong == []


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
