"""Every time a response carries is written one way: RFC 3339, UTC, milliseconds, `Z`
(`to_rfc3339`). A response model's `datetime` field needs that serializer (`Instant`, or
the domain's `Timestamp`): a bare `datetime` writes microseconds, or no fraction at all
when they are 0. The walk covers every model a route answers with, nested ones included."""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel, PlainSerializer

from notifyhub.api.app import create_app
from notifyhub.api.schemas.common import Instant
from notifyhub.domain.notification import to_rfc3339
from notifyhub.settings import Settings


def _response_models() -> set[type[BaseModel]]:
    offline = Settings(
        redis_url="redis://unused",
        database_url="postgresql+asyncpg://unused/unused",
        jwt_secret="x" * 32,  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
    )
    app = create_app(offline)
    found: set[type[BaseModel]] = set()
    for context in iter_route_contexts(app.routes):  # as get_openapi walks included routers
        route = context.original_route
        if not isinstance(route, APIRoute):
            continue
        answers = [route.response_model]
        answers += [r.get("model") for r in (route.responses or {}).values() if isinstance(r, dict)]
        for answer in answers:
            found |= set(_models(answer))
    return found


def _models(annotation: Any, seen: set[Any] | None = None) -> Iterator[type[BaseModel]]:
    """`annotation`'s models and every model their fields reach."""
    seen = set() if seen is None else seen
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return
        seen.add(annotation)
        yield annotation
        for field in annotation.model_fields.values():
            yield from _models(field.annotation, seen)
    for arg in typing.get_args(annotation):
        yield from _models(arg, seen)


def _written_by_to_rfc3339(metadata: Any) -> bool:
    return any(isinstance(m, PlainSerializer) and m.func is to_rfc3339 for m in metadata)


def _bare_times(annotation: Any, metadata: Any = ()) -> Iterator[str]:
    """The `datetime`s in `annotation` not written by `to_rfc3339`."""
    if annotation is datetime:
        if not _written_by_to_rfc3339(metadata):
            yield "datetime"
        return
    if typing.get_origin(annotation) is Annotated:
        yield from _bare_times(annotation.__origin__, annotation.__metadata__)
        return
    for arg in typing.get_args(annotation):
        yield from _bare_times(arg)


def _time_fields() -> dict[str, list[str]]:
    """Each response model's time fields (`Model.field`) -> its bare datetimes."""
    return {
        f"{model.__name__}.{name}": list(_bare_times(field.annotation, field.metadata))
        for model in _response_models()
        for name, field in model.model_fields.items()
        if any(True for _ in _bare_times(field.annotation))  # a datetime in it at all
    }


def test_every_time_in_a_response_is_written_with_milliseconds() -> None:
    fields = _time_fields()
    # the walk reaches the models (a walk that found none would pass whatever they hold)
    for known in ("InboxItem.created_at", "ApiKeyOut.created_at", "AuditEntryOut.at"):
        assert known in fields, sorted(fields)
    bare = sorted(name for name, found in fields.items() if found)
    assert bare == [], f"datetime fields of responses without Instant: {bare}"


RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_the_examples_write_times_as_the_responses_do() -> None:
    """The documented examples (docs/api.md shows them) of the models' own time fields."""
    shown = []
    for model in _response_models():
        times = {
            n for n, f in model.model_fields.items() if any(True for _ in _bare_times(f.annotation))
        }
        extra = model.model_config.get("json_schema_extra")
        for example in extra.get("examples", []) if isinstance(extra, dict) else []:
            for name in times & set(example):
                if example[name] is not None:
                    shown.append((model.__name__, name, example[name]))
    assert shown  # the examples were reached
    assert [s for s in shown if not RFC3339_MS.match(s[2])] == []


class _Drifted(BaseModel):
    at: datetime
    maybe: Instant | None
    nested: list[dict[str, datetime]]


def test_the_walk_finds_a_bare_datetime_wherever_it_is() -> None:
    found = {
        n: list(_bare_times(f.annotation, f.metadata)) for n, f in _Drifted.model_fields.items()
    }
    assert found == {"at": ["datetime"], "maybe": [], "nested": ["datetime"]}


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC), "2026-11-30T01:02:03.456Z"),
        (datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC), "2026-11-30T01:02:03.000Z"),
        (
            datetime(2026, 11, 30, 3, 2, 3, 456000, tzinfo=timezone(timedelta(hours=2))),
            "2026-11-30T01:02:03.456Z",
        ),
    ],
)
def test_instant_writes_what_timestamp_writes(value: datetime, written: str) -> None:
    class Out(BaseModel):
        at: Instant

    assert Out(at=value).model_dump_json() == f'{{"at":"{written}"}}'
    assert Out.model_json_schema(mode="serialization")["properties"]["at"]["format"] == "date-time"
