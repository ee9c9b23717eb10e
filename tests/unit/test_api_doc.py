"""docs/api.md is the OpenAPI document rendered: the two cannot disagree."""

from __future__ import annotations

from pathlib import Path

from notifyhub.api.apidoc import markdown, offline_document

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_docs_api_md_is_generated_from_the_openapi_document() -> None:
    expected = markdown(offline_document())
    assert API_MD.read_text(encoding="utf-8") == expected, (
        "docs/api.md is stale: run `python -m notifyhub.api.apidoc > docs/api.md`"
    )


def test_every_operation_is_in_the_doc() -> None:
    document = offline_document()
    text = API_MD.read_text(encoding="utf-8")
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert f"### `{method.upper()} {path}`" in text
            if "x-caller" in operation:
                assert f"Caller: {operation['x-caller']}." in text
