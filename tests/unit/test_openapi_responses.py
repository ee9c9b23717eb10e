"""Every success the API answers is documented with its schema, and with its status."""

from __future__ import annotations

from typing import Any

import pytest

from notifyhub.api.app import create_app
from notifyhub.settings import Settings

TEXT_TYPES = {"text/event-stream", "text/plain"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    offline = Settings(
        redis_url="redis://unused",
        database_url="postgresql+asyncpg://unused/unused",
        jwt_secret="x" * 32,  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
    )
    return create_app(offline).openapi()


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def _untyped(document: dict[str, Any], media_type: str, schema: dict[str, Any]) -> str | None:
    """Why `schema` does not describe the body, or None when it does: JSON is a named
    model with properties; text is a string."""
    if media_type in TEXT_TYPES:
        return None if schema.get("type") == "string" else "text without a string schema"
    ref = schema.get("$ref", "")
    if not ref.startswith("#/components/schemas/"):
        return f"not a named model: {schema}"
    model = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return None if model.get("properties") else f"{ref} has no properties"


def test_every_success_has_a_response_schema(document: dict[str, Any]) -> None:
    missing = []
    for method, path, operation in _operations(document):
        for status, response in operation["responses"].items():
            if not status.startswith("2"):
                continue
            content = response.get("content", {})
            if status == "204":
                if content:
                    missing.append((method, path, status, "204 with a body"))
                continue
            if not content:
                missing.append((method, path, status, "no content"))
            for media_type, body in content.items():
                why = _untyped(document, media_type, body.get("schema") or {})
                if why is not None:
                    missing.append((method, path, status, why))
    assert missing == []


def test_the_stream_documents_server_sent_events(document: dict[str, Any]) -> None:
    content = document["paths"]["/v1/me/stream"]["get"]["responses"]["200"]["content"]
    assert set(content) == {"text/event-stream"}


def test_create_or_replace_puts_document_200_and_201(document: dict[str, Any]) -> None:
    """An admin PUT answers 201 when it created the object, 200 when it replaced it."""
    puts = [(p, op) for m, p, op in _operations(document) if m == "PUT" and "/admin/" in p]
    assert puts
    for path, operation in puts:
        responses = operation["responses"]
        assert {"200", "201"} <= set(responses), path
        schemas = {
            responses[s]["content"]["application/json"]["schema"]["$ref"] for s in ("200", "201")
        }
        assert len(schemas) == 1, path


def test_the_check_refuses_an_untyped_object(document: dict[str, Any]) -> None:
    free = {"type": "object", "additionalProperties": True}
    assert _untyped(document, "application/json", free) is not None
    assert _untyped(document, "application/json", {}) is not None
    assert _untyped(document, "text/event-stream", {"type": "string"}) is None
