"""notifyhub-client's models against the hub's own OpenAPI document: a field added,
removed, renamed or made required on either side, or an enum's values changed, fails
here. Each client model names the operation whose request or answer it mirrors (not a
schema's name, so a renamed component is followed and a removed route is caught), or the
stream event whose data it is (the stream's `x-sse-events`).

Answers the hub still declares as a bare object (`dict[str, Any]` routes) cannot be
compared here: they are listed in LIVE_CHECKED and compared with real answers of a hub
instead (`test_untyped_answers_match_the_client_models`); once the hub types one, it is
compared here automatically.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pydantic
import pytest
from pydantic import BaseModel

import notifyhub_client as client
from notifyhub.api.app import create_app
from notifyhub.settings import Settings
from notifyhub_client import _operations
from notifyhub_client import models as m
from notifyhub_client._operations import QUEUE_MESSAGES_PATH, Operation, Operations

# (method, path, "request" | status | "event:<name>", property names to descend into)
Where = tuple[str, str, str, tuple[str, ...]]

PUBLISH = ("POST", "/v1/notifications")
STREAM = ("GET", "/v1/me/stream")
QUEUE = ("GET", QUEUE_MESSAGES_PATH)
DEFINITION = ("PUT", "/v1/admin/delivery-definitions/{name}")

MIRRORS: dict[type[BaseModel], list[Where]] = {
    # requests
    m.PublishRequest: [(*PUBLISH, "request", ())],
    m.Recipients: [(*PUBLISH, "request", ("recipients",))],
    m.Ref: [(*PUBLISH, "request", ("target",)), ("POST", "/v1/events", "request", ("target",))],
    m.Actor: [
        (*PUBLISH, "request", ("actor",)),
        ("POST", "/v1/events", "request", ("actor",)),
        ("GET", "/v1/me/notifications/{notification_id}", "200", ("actor",)),
    ],
    m.Action: [
        (*PUBLISH, "request", ("actions",)),
        ("GET", "/v1/me/notifications/{notification_id}", "200", ("actions",)),
    ],
    m.Completed: [("GET", "/v1/me/notifications/{notification_id}", "200", ("completed",))],
    m.Thread: [("GET", "/v1/me/notifications/{notification_id}", "200", ("thread",))],
    m.EventRequest: [("POST", "/v1/events", "request", ())],
    m.ReadAllRequest: [("POST", "/v1/me/notifications/read-all", "request", ())],
    m.RelationshipRequest: [
        ("POST", "/v1/relationships", "request", ()),
        ("DELETE", "/v1/relationships", "request", ()),
    ],
    m.DelayedRequest: [("POST", "/v1/delayed", "request", ())],
    m.AckRequest: [("POST", QUEUE[1] + "/{message_id}/ack", "request", ())],
    m.DeliveryRequest: [("POST", "/v1/deliveries", "request", ())],
    m.MembersChange: [("POST", "/v1/admin/groups/{group}/members", "request", ())],
    m.TopicMembers: [("PUT", "/v1/admin/topics/{topic}", "request", ())],
    m.RuleRequest: [("PUT", "/v1/admin/rules/{rule}", "request", ())],
    m.RuleRecipient: [
        ("PUT", "/v1/admin/rules/{rule}", "request", ("recipients",)),
        ("PUT", "/v1/admin/rules/{rule}", "200", ("recipients",)),
    ],
    m.DefinitionRequest: [(*DEFINITION, "request", ())],
    m.Alert: [(*DEFINITION, "request", ("alert",))],
    m.EmailTarget: [(*DEFINITION, "request", ("email",))],
    m.RabbitTarget: [(*DEFINITION, "request", ("rabbitmq",))],
    # answers
    m.Accepted: [(*PUBLISH, "202", ())],
    m.EventAccepted: [("POST", "/v1/events", "202", ())],
    m.Updated: [("POST", "/v1/me/notifications/read-all", "200", ())],
    m.Notification: [
        ("GET", "/v1/me/notifications/{notification_id}", "200", ()),
        (*STREAM, "event:notification", ()),
    ],
    m.Counts: [
        ("GET", "/v1/me/notifications/counts", "200", ()),
        (*STREAM, "event:counts", ()),
        (*STREAM, "event:reset", ()),
    ],
    m.ViewCount: [
        ("GET", "/v1/me/notifications/counts", "200", ("views",)),
        (*STREAM, "event:counts", ("views",)),
    ],
    m.InboxUpdate: [(*STREAM, "event:update", ())],
    m.Deleted: [(*STREAM, "event:delete", ())],
    m.Group: [
        ("PUT", "/v1/admin/groups/{group}", "200", ()),
        ("POST", "/v1/admin/groups/{group}/members", "200", ()),
    ],
    m.Topic: [("PUT", "/v1/admin/topics/{topic}", "200", ())],
    m.Rule: [("PUT", "/v1/admin/rules/{rule}", "200", ())],
    m.DelayedAccepted: [("POST", "/v1/delayed", "201", ())],
    m.QueueMessage: [(*QUEUE, "200", ("messages",))],
    m.DelayedMessage: [("GET", "/v1/delayed/{message_id}", "200", ())],
    m.DeliveryAccepted: [("POST", "/v1/deliveries", "202", ())],
    m.Delivery: [
        ("GET", "/v1/deliveries/{delivery_id}", "200", ()),
        ("POST", "/v1/deliveries/{delivery_id}/confirm", "200", ()),
    ],
    m.DeliveryDefinition: [(*DEFINITION, "200", ())],
    m.Problem: [(*PUBLISH, "422", ()), ("GET", "/v1/delayed/{message_id}", "404", ())],
}

CLIENT_ONLY = {
    (m.Notification, "replaces"): "a stream's notification event says which item it replaced",
    (m.Notification, "resurfaced"): "a stream's notification event says a snooze ended",
    (m.Counts, "seq"): "a stream's counts and reset events carry the seq they are as of",
}
"""Fields a model has that some schema it mirrors has not (a stream event's data has more
than the answer of the same shape), each with its reason. Where a schema has one, it is
compared as any field is, except whether it is required: the client cannot require what
another answer it reads leaves out."""

LIVE_CHECKED = {
    m.QueueMessage,
    m.DelayedMessage,
    m.Delivery,
    m.DeliveryAttempt,
    m.DeliveryDefinition,
}
"""Answers the hub declares as a bare object: compared with real answers below."""


def _document() -> dict[str, Any]:
    offline = Settings(
        redis_url="redis://unused",
        database_url="postgresql+asyncpg://unused/unused",
        jwt_secret="x" * 32,  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
    )
    return create_app(offline).openapi()


DOCUMENT = _document()


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    """Follow `$ref`, drop a nullable `anyOf`'s null, and step into arrays' items and
    maps' values."""
    while True:
        if "$ref" in schema:
            schema = DOCUMENT["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in schema:
            options = [s for s in schema["anyOf"] if s.get("type") != "null"]
            if len(options) != 1:
                return schema
            schema = options[0]
        elif schema.get("type") == "array" and "items" in schema:
            schema = schema["items"]
        elif schema.get("type") == "object" and isinstance(
            schema.get("additionalProperties"), dict
        ):
            schema = schema["additionalProperties"]
        else:
            return schema


def _schema(where: Where) -> dict[str, Any]:
    method, path, part, descend = where
    operation = DOCUMENT["paths"][path][method.lower()]
    if part == "request":
        content = operation["requestBody"]["content"]
    else:
        content = operation["responses"]["200" if part.startswith("event:") else part]["content"]
    schema = next(iter(content.values()))["schema"]
    if part.startswith("event:"):  # one event's data: the stream's text/event-stream lists them
        schema = schema["x-sse-events"][part.removeprefix("event:")]
    schema = _resolve(schema)
    for name in descend:
        schema = _resolve(schema["properties"][name])
    return schema


def _typed(schema: dict[str, Any]) -> bool:
    return bool(schema.get("properties"))


def _literal_values(annotation: Any) -> set[Any] | None:
    """The values of a `Literal[...]` (or `Literal[...] | None`) annotation, else None."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    for candidate in (annotation, *options):
        if typing.get_origin(candidate) is typing.Literal:
            return set(typing.get_args(candidate))
    return None


def _drift(model: type[BaseModel], schema: dict[str, Any]) -> list[str]:
    server = set(schema["properties"])
    required = set(schema.get("required", ()))
    client = set(model.model_fields)
    problems = [f"missing in the client: {n}" for n in sorted(server - client)]
    problems += [
        f"not in the hub's schema: {n}"
        for n in sorted(client - server)
        if (model, n) not in CLIENT_ONLY
    ]
    for name in sorted(server & client):
        field = model.model_fields[name]
        if field.is_required() != (name in required) and (model, name) not in CLIENT_ONLY:
            side = "the hub" if name in required else "the client"
            problems.append(f"{name}: required by {side} only")
        enum = _resolve(schema["properties"][name]).get("enum")
        values = _literal_values(field.annotation)
        if enum is not None and values is not None and set(enum) != values:
            problems.append(f"{name}: the hub allows {sorted(enum)}, the client {sorted(values)}")
    return problems


def test_every_public_model_is_mirrored_or_declared() -> None:
    public = {
        value
        for value in vars(m).values()
        if isinstance(value, type)
        and issubclass(value, BaseModel)
        and value.__module__ == m.__name__
        and value not in (m.Request, m.Response)
    }
    assert public - set(MIRRORS) - LIVE_CHECKED == set()


def _models_in(annotation: Any) -> set[type[BaseModel]]:
    found = (
        {annotation}
        if isinstance(annotation, type) and issubclass(annotation, BaseModel)
        else set()
    )
    return found.union(*(_models_in(arg) for arg in typing.get_args(annotation)))


def test_every_model_an_operation_takes_or_answers_is_exported() -> None:
    """`put_delivery_definition(email=EmailTarget(...))`: a caller imports the parameter's
    type from `notifyhub_client`, as it does `RuleRecipient` and `Alert`."""
    used: set[type[BaseModel]] = set()
    for value in vars(Operations).values():
        if isinstance(value, Operation):
            hints = typing.get_type_hints(value.build, vars(m) | vars(_operations))
            used |= {model for hint in hints.values() for model in _models_in(hint)}
    assert used, "no operation found"
    missing = sorted(model.__name__ for model in used if model.__name__ not in client.__all__)
    assert missing == []


def test_each_client_only_field_is_in_a_schema_its_model_mirrors() -> None:
    """An exemption is for the answers without the field: one the hub sends nowhere any
    more is a drift too."""
    gone = [
        f"{model.__name__}.{name}"
        for model, name in CLIENT_ONLY
        if not any(name in _schema(where).get("properties", {}) for where in MIRRORS[model])
    ]
    assert gone == []


def test_every_stream_event_is_mirrored() -> None:
    """The stream's events are answers too: a new one, or one no model is compared with,
    fails here (a thread's update carrying the whole item and a notification's
    `resurfaced` went unread by the client while none was)."""
    events = _schema((*STREAM, "200", ()))["x-sse-events"]
    mirrored = {
        part.removeprefix("event:")
        for places in MIRRORS.values()
        for _method, _path, part, descend in places
        if part.startswith("event:") and not descend
    }
    assert mirrored == set(events)


@pytest.mark.parametrize(
    ("model", "where"),
    [(model, where) for model, places in MIRRORS.items() for where in places],
    ids=lambda value: value.__name__ if isinstance(value, type) else " ".join(value[:3]),
)
def test_client_model_matches_the_openapi_schema(model: type[BaseModel], where: Where) -> None:
    schema = _schema(where)
    if not _typed(schema):
        assert model in LIVE_CHECKED, (
            f"{where[0]} {where[1]} answers an untyped object: compare {model.__name__} "
            "with a real answer (LIVE_CHECKED)"
        )
        return
    assert _drift(model, schema) == [], f"{model.__name__} drifted from {where}"


def test_the_drift_check_sees_a_drift() -> None:
    """The comparison itself: a renamed field, a dropped one and a changed enum show."""

    class Drifted(m.Response):
        id: str
        recipient_count: int  # renamed from `recipients`
        severity: typing.Literal["info", "loud"] = "info"

    schema = {
        "properties": {
            "id": {"type": "string"},
            "recipients": {"type": "integer"},
            "scheduled_for": {"type": "string"},
            "severity": {"$ref": "#/components/schemas/Severity"},
        },
        "required": ["id", "recipients", "scheduled_for"],
    }
    assert _drift(Drifted, schema) == [
        "missing in the client: recipients",
        "missing in the client: scheduled_for",
        "not in the hub's schema: recipient_count",
        "severity: the hub allows ['critical', 'error', 'info', 'success', 'warning'], "
        "the client ['info', 'loud']",
    ]


# --- Answers from a newer hub: unknown fields are ignored, at every depth ------------


def _refusing(annotation: Any, known: bool = False) -> list[str]:
    """The models under `annotation` that would refuse an unknown field in an answer: a
    model forbidding extras not marked `Known[...]`; answer models are walked into."""
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *marks = typing.get_args(annotation)
        return _refusing(inner, known or any(isinstance(x, m.IgnoreUnknown) for x in marks))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        forbids = annotation.model_config.get("extra") == "forbid"
        return [annotation.__name__] if forbids and not known else []
    return [found for arg in typing.get_args(annotation) for found in _refusing(arg, known)]


def test_no_answer_refuses_a_field_a_newer_hub_adds() -> None:
    """Every answer model, and every model in it at any depth (`Actor` in a thread's
    `actors`, `RuleRecipient` in a rule, ...), ignores unknown fields; request models
    refuse them (a typo fails before anything is sent)."""
    answers = [
        value
        for value in vars(m).values()
        if isinstance(value, type) and issubclass(value, m.Response) and value is not m.Response
    ]
    refusing = {
        f"{model.__name__}.{name}": found
        for model in answers
        for name, hint in typing.get_type_hints(model, vars(m), include_extras=True).items()
        if name in model.model_fields and (found := _refusing(hint))
    }
    assert refusing == {}
    assert all(
        model.model_config.get("extra") == "forbid"
        for model in vars(m).values()
        if isinstance(model, type) and issubclass(model, m.Request)
    )


NEWER = {"added_later": {"nested": True}}
"""A field this client does not know, as a newer hub might add it anywhere."""
WHEN = "2026-11-20T09:15:02.113Z"


def _json(value: Any) -> bytes:
    """JSON as the hub sends it (`model_validate_json` takes the path answers take)."""
    return json.dumps(value).encode()


def test_answers_with_unknown_fields_in_every_part_are_read() -> None:
    actor = {"id": "ana", "name": "Ana", **NEWER}
    notification = m.Notification.model_validate(
        {
            "id": "n1",
            "tenant": "default",
            "title": "Hi",
            "created_at": WHEN,
            "expires_at": WHEN,
            "actor": actor,
            "target": {"type": "order", "id": "42", **NEWER},
            "actions": [{"id": "ok", "label": "OK", **NEWER}],
            "completed": {"action": "ok", "completed_at": WHEN, **NEWER},
            "thread": {
                "key": "k",
                "latest_id": "n1",
                "activity_count": 1,
                "actors": [actor],
                "first_at": WHEN,
                "last_at": WHEN,
                **NEWER,
            },
            **NEWER,
        }
    )
    assert notification.actor == m.Actor(id="ana", name="Ana")
    assert notification.thread is not None and notification.thread.actors == [notification.actor]
    assert notification.target == m.Ref(type="order", id="42")
    assert [a.id for a in notification.actions] == ["ok"]
    update = m.InboxUpdate.model_validate(
        {"id": "n1", "status": "read", "seen": True, "read_at": WHEN, "actor": actor, **NEWER}
    )
    assert update.actor == notification.actor
    recipient = {"relationship": "owner", "title": "t", **NEWER}
    rule = m.Rule.model_validate(
        {"name": "r", "tenant": "t", "target_type": "order", "recipients": [recipient], **NEWER}
    )
    assert rule.recipients == [m.RuleRecipient(relationship="owner", title="t")]
    definition = m.DeliveryDefinition.model_validate_json(
        _json(
            {
                "tenant": "t",
                "name": "d",
                "kind": "email",
                "url": None,
                "email": {"subject": "s", "text": "x", **NEWER},
                "rabbitmq": {"exchange": "e", **NEWER},
                "timeout_s": 5,
                "retry_intervals": "5s",
                "max_retries": 3,
                "alert": {"trigger": "never", **NEWER},
                "need_confirm": False,
                "max_confirm_delay_s": 60,
                "disabled": False,
                "rotating": False,
                **NEWER,
            }
        )
    )
    assert definition.email == m.EmailTarget(subject="s", text="x")
    assert definition.alert.trigger == "never"

    # Built by a caller, the same parts still refuse a typo.
    with pytest.raises(pydantic.ValidationError, match="nmae"):
        m.Actor.model_validate({"id": "ana", "nmae": "Ana"})
    with pytest.raises(pydantic.ValidationError, match="added_later"):
        m.RuleRecipient.model_validate(recipient)


# --- Answers the OpenAPI document leaves untyped, compared with a real hub's --------


def _assert_same_fields(model: type[BaseModel], answer: dict[str, Any]) -> None:
    fields = {n for n in model.model_fields if (model, n) not in CLIENT_ONLY}
    assert set(answer) == fields, f"{model.__name__}: hub {sorted(answer)} != {sorted(fields)}"
    model.model_validate(answer)


async def test_untyped_answers_match_the_client_models(
    hub: Any, create_key: Callable[..., Awaitable[str]]
) -> None:
    admin = {"Authorization": f"Bearer {await create_key('drift', 'admin')}"}
    http: httpx.AsyncClient = hub.client
    queue = f"drift-{secrets.token_hex(3)}"

    pushed = await http.post(
        "/v1/delayed", headers=admin, json={"queue": queue, "body": {"n": 1}, "delay_ms": 0}
    )
    assert pushed.status_code == 201, pushed.text
    message = await http.get(f"/v1/delayed/{pushed.json()['id']}", headers=admin)
    _assert_same_fields(m.DelayedMessage, message.json())
    path = QUEUE_MESSAGES_PATH.format(queue=queue)
    taken = (await http.get(path, headers=admin, params={"wait": 5})).json()["messages"]
    assert len(taken) == 1
    _assert_same_fields(m.QueueMessage, taken[0])

    name = f"drift-{secrets.token_hex(3)}"
    definition = await http.put(
        f"/v1/admin/delivery-definitions/{name}",
        headers=admin,
        json={"url": "https://receiver.example/hook"},
    )
    assert definition.status_code == 201, definition.text
    _assert_same_fields(m.DeliveryDefinition, definition.json())
    created = await http.post(
        "/v1/deliveries", headers=admin, json={"definition": name, "payload": {"n": 1}}
    )
    assert created.status_code == 202, created.text
    async with asyncio.timeout(10):  # sent at once, to a host that is not there: it fails
        while not (
            delivery := await http.get(f"/v1/deliveries/{created.json()['id']}", headers=admin)
        ).json()["attempts"]:
            await asyncio.sleep(0.05)
    _assert_same_fields(m.Delivery, delivery.json())
    _assert_same_fields(m.DeliveryAttempt, delivery.json()["attempts"][0])
