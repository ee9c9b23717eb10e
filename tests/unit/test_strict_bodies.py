"""Every number and boolean of every request body is strict JSON: a number in a string, or
a boolean as a string or a number, is refused (not converted), and the OpenAPI document
offers no string in their place. Request bodies are the `Strict` models; the walk covers
every field they reach, nested models included (free-form JSON objects aside)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import notifyhub.api.schemas
from notifyhub.api.apidoc import offline_document
from notifyhub.api.schemas.common import Strict
from notifyhub.api.schemas.delayed import DelayedIn
from notifyhub.api.schemas.inbox import PatchRequest
from notifyhub.api.schemas.notifications import PublishRequest

for _module in pkgutil.iter_modules(notifyhub.api.schemas.__path__):  # their models count
    importlib.import_module(f"notifyhub.api.schemas.{_module.name}")

SCALARS = ("int", "float", "bool")


def _bodies() -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    todo: list[type[BaseModel]] = [Strict]
    while todo:
        model = todo.pop()
        found.append(model)
        todo.extend(model.__subclasses__())
    return [m for m in found if m is not Strict]


def _lax(node: Any, path: str, defs: dict[str, Any], out: list[str], seen: set[str]) -> None:
    """The paths of the int, float and bool validators under `node` that are not strict."""
    if isinstance(node, list):
        for item in node:
            _lax(item, path, defs, out, seen)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in SCALARS and not node.get("strict"):
        out.append(f"{path} ({kind})")
    if kind == "definitions":
        defs.update({d["ref"]: d for d in node["definitions"]})
        _lax(node["schema"], path, defs, out, seen)
        return
    if kind == "definition-ref":
        ref = node["schema_ref"]
        if "JsonValue" not in ref and ref not in seen:  # free-form JSON keeps its types
            seen.add(ref)
            _lax(defs[ref], path, defs, out, seen)
        return
    if kind == "model-fields":
        for name, field in node["fields"].items():
            _lax(field, f"{path}.{name}", defs, out, seen)
        return
    for key, value in node.items():
        if key not in ("metadata", "serialization", "ref"):
            _lax(value, path, defs, out, seen)


@pytest.mark.parametrize("model", _bodies(), ids=lambda m: m.__name__)
def test_every_number_and_boolean_of_a_request_body_is_strict(model: type[BaseModel]) -> None:
    out: list[str] = []
    _lax(model.__pydantic_core_schema__, model.__name__, {}, out, set())
    assert out == []


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        found = {ref.rsplit("/", 1)[1]} if isinstance(ref, str) else set()
        return found.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def _string_alternatives(node: Any, path: str, out: list[str]) -> None:
    """Where a number or boolean is offered a string instead (times aside: RFC 3339)."""
    if isinstance(node, list):
        for item in node:
            _string_alternatives(item, path, out)
        return
    if not isinstance(node, dict):
        return
    options = node.get("anyOf") or node.get("oneOf") or []
    types = {o.get("type") for o in options if isinstance(o, dict)}
    is_time = any(o.get("format") == "date-time" for o in options if isinstance(o, dict))
    if "string" in types and types & {"integer", "number", "boolean"} and not is_time:
        out.append(path)
    for key, value in node.items():
        _string_alternatives(value, f"{path}.{key}", out)


def test_request_bodies_are_strict_models_and_offer_no_string_for_a_number() -> None:
    document = offline_document()
    schemas = document["components"]["schemas"]
    bodies: set[str] = set()
    for operations in document["paths"].values():
        for operation in operations.values():
            bodies |= _refs(operation.get("requestBody", {}))
    todo, reached = list(bodies), set()
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(_refs(schemas[name]))
    strict_names = {m.__name__ for m in _bodies()}
    assert {name.removesuffix("-Input") for name in bodies} <= strict_names
    out: list[str] = []
    for name in sorted(reached):
        _string_alternatives(schemas[name], name, out)
    assert out == []


@pytest.mark.parametrize(
    ("model", "body", "field"),
    [
        (PatchRequest, {"snooze": "3600"}, "snooze"),
        (PatchRequest, {"archived": "true"}, "archived"),
        (PatchRequest, {"read": 1}, "read"),
        (PublishRequest, {"recipients": {"users": ["u"]}, "title": "t", "ttl": "60"}, "ttl"),
        (PublishRequest, {"recipients": {"users": ["u"]}, "title": "t", "ttl": 60.0}, "ttl"),
        (PublishRequest, {"recipients": {"users": ["u"]}, "title": "t", "delay": True}, "delay"),
        (DelayedIn, {"topic": "q", "body": {}, "priority": "1"}, "priority"),
    ],
)
def test_a_string_or_bool_is_not_converted(
    model: type[BaseModel], body: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body, from_attributes=True)  # as FastAPI and the fast path do
    assert [e["loc"][0] for e in caught.value.errors()] == [field]
