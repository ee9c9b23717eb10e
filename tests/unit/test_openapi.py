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


def test_every_v1_operation_documents_bearer_auth_and_problems() -> None:
    document = _document()
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if not path.startswith("/v1/"):
                continue
            assert operation["security"] == [{"bearer": []}], (method, path)
            for status in ("401", "403", "404", "413", "422", "429", "503"):
                content = operation["responses"][status]["content"]
                assert set(content) == {"application/problem+json"}, (method, path, status)


def test_every_reference_resolves() -> None:
    document = _document()
    names = set(document["components"]["schemas"])
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(document)))
    assert refs <= names
    assert "HTTPValidationError" not in names  # FastAPI's 422 shape is not ours
