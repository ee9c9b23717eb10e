"""The OpenAPI document tells clients about auth and problem+json errors."""

from __future__ import annotations

import json
import re
from typing import Any

from notifyhub.api.app import create_app
from notifyhub.settings import Settings


def _document() -> dict[str, Any]:
    offline = Settings(
        redis_url="redis://unused",
        database_url="postgresql+asyncpg://unused/unused",
        jwt_secret="x" * 32,  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
    )
    return create_app(offline).openapi()


def _expected_problems(method: str, path: str, operation: dict[str, Any]) -> set[str]:
    """What every operation of its kind answers: 401, 429, 503 for all; 403 for API keys
    (scope, tenant); 413 and 422 where a body is read; 422 where parameters are."""
    expected = {"401", "429", "503"}
    if not path.startswith("/v1/me/"):
        expected.add("403")
    if method in ("post", "put", "patch", "delete"):
        expected |= {"413", "422"}
    if operation.get("parameters"):
        expected.add("422")
    return expected


def test_every_v1_operation_documents_bearer_auth_and_its_problems() -> None:
    document = _document()
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if not path.startswith("/v1/"):
                continue
            assert operation["security"] == [{"bearer": []}], (method, path)
            problems = {s for s in operation["responses"] if s[0] in "45"}
            assert _expected_problems(method, path, operation) <= problems, (method, path)
            for status in problems:
                content = operation["responses"][status]["content"]
                assert set(content) == {"application/problem+json"}, (method, path, status)


def test_not_found_and_conflict_only_where_answered() -> None:
    """404 only for operations naming a thing (path id or name, or a body naming one),
    409 only where a state can forbid the change."""
    document = _document()
    conflicts = {
        (m, p)
        for p, ops in document["paths"].items()
        for m, op in ops.items()
        if "409" in op["responses"]
    }
    assert conflicts == {
        ("delete", "/v1/delayed/{message_id}"),
        ("post", "/v1/queues/{queue}/messages/{message_id}/ack"),
        ("post", "/v1/topics/{topic}/messages/{message_id}/ack"),
        ("post", "/v1/deliveries"),
        ("post", "/v1/deliveries/{delivery_id}/confirm"),
        ("post", "/v1/admin/api-keys"),  # the name is taken
        ("delete", "/v1/admin/api-keys/{name}"),  # several tenants' keys have the name
        ("patch", "/v1/me/notifications/{notification_id}"),  # the pin limit
        ("post", "/v1/me/notifications/{notification_id}/actions/{action_id}"),  # done once
        ("put", "/v1/admin/views/{name}"),  # the view limit
        ("put", "/v1/me/views/{name}"),  # the view limit; a tenant view's name
        ("post", "/v1/me/push-subscriptions"),  # the subscription limit
    }
    # User ids are the calling application's: the hub answers for any (empty when unknown).
    never_missing = {"/v1/admin/users/{tenant}/{user}"}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if "404" in operation["responses"]:
                assert "{" in path or method == "delete", (method, path)
            if method == "get" and path.endswith("}") and path not in never_missing:
                assert "404" in operation["responses"], (method, path)


def test_no_internal_notes_in_descriptions() -> None:
    text = json.dumps(_document())
    for internal in ("fastpath", "fast path", "tests/", ".py"):
        assert internal not in text, internal


def test_every_reference_resolves() -> None:
    document = _document()
    names = set(document["components"]["schemas"])
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(document)))
    assert refs <= names
    assert "HTTPValidationError" not in names  # FastAPI's 422 shape is not ours
