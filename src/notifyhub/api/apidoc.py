"""`docs/api.md`: the HTTP API reference, rendered from the OpenAPI document.

`python -m notifyhub.api.apidoc > docs/api.md` regenerates it;
tests/unit/test_api_doc.py fails when the file and the document disagree."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

from notifyhub.api.app import create_app
from notifyhub.settings import Settings

REF = "#/components/schemas/"
HEADER = """# notifyhub HTTP API

Generated from the hub's OpenAPI document (`GET /openapi.json`, browsable at `/docs`) by
`python -m notifyhub.api.apidoc > docs/api.md`; a test fails when they differ, so edit the
routers and schemas, not this file.

All bodies are JSON (a body sent without `Content-Type` is read as JSON); numbers and
booleans must be JSON numbers and booleans (`"3600"` or `"true"` is a 422 naming the
field). Times in answers are RFC 3339 UTC strings (inputs also take epoch milliseconds
where noted). Errors are RFC 9457 `application/problem+json` with `type`,
`title`, `status`, `detail` (and `errors` for a 422). Services authenticate with
`Authorization: Bearer <API key>`, users with `Authorization: Bearer <JWT>`. "Design 1"
to "Design 5" name the five designs notifyhub implements ([Where notifyhub comes
from](origins.md)).
"""
# The stream's description links each event's schema; on this page, its own section.
SCHEMA_LINK = re.compile(r"^- `(\w+)`: (.*)\[(\w+)\]\(#/components/schemas/\w+\)", re.M)


def offline_document() -> dict[str, Any]:
    """The document as the hub serves it; building the app opens no connection."""
    offline = Settings(
        redis_url="redis://unused",
        database_url="postgresql+asyncpg://unused/unused",
        jwt_secret="x" * 32,
        _env_file=None,
    )
    return create_app(offline).openapi()


def _json(value: Any) -> list[str]:
    return ["```json", json.dumps(value, indent=2, ensure_ascii=False), "```"]


def _example(document: dict[str, Any], media: dict[str, Any]) -> Any:
    if "example" in media:
        return media["example"]
    schema = media.get("schema", {})
    refs = [s for s in schema.get("anyOf", []) if "$ref" in s] or [schema]
    name = refs[0].get("$ref", "").removeprefix(REF)
    examples = document["components"]["schemas"].get(name, {}).get("examples", [])
    return examples[0] if examples else None


def _parameters(operation: dict[str, Any]) -> Iterator[str]:
    parameters = operation.get("parameters", [])
    if not parameters:
        return
    yield "| Parameter | In | Required | Description | Example |"
    yield "|---|---|---|---|---|"
    for p in parameters:
        example = (p["schema"].get("examples") or [""])[0]
        description = " ".join(p.get("description", "").split()).replace("|", "\\|")
        required = "yes" if p.get("required") else "no"
        yield f"| `{p['name']}` | {p['in']} | {required} | {description} | `{example}` |"
    yield ""


def _responses(document: dict[str, Any], operation: dict[str, Any]) -> Iterator[str]:
    problems = []
    for status, response in operation["responses"].items():
        content = response.get("content", {})
        if status[0] in "45" and "application/problem+json" in content:
            problems.append(f"`{status}`: {response['description']}")
            continue
        yield f"**{status}**: {response['description'].splitlines()[0]}"
        yield ""
        for media_type, media in content.items():
            example = _example(document, media)
            if media_type == "text/event-stream":
                yield from ("```", example.rstrip("\n"), "```", "")
            elif example is not None and media_type == "application/json":
                yield from (*_json(example), "")
    if problems:
        yield "Problems (`application/problem+json`):"
        yield ""
        yield from (f"- {problem}" for problem in sorted(problems))
        yield ""


def _operation(document: dict[str, Any], method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("deprecated"):
        lines += ["**Deprecated.**", ""]
    lines += [op.get("description", op.get("summary", "")), ""]
    lines += list(_parameters(op))
    body = op.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        lines += ["Request:", "", *_json(_example(document, body)), ""]
    lines += list(_responses(document, op))
    return lines


def _stream_events(document: dict[str, Any]) -> list[str]:
    response = document["paths"]["/v1/me/stream"]["get"]["responses"]["200"]
    events = response["content"]["text/event-stream"]["schema"]["x-sse-events"]
    description = SCHEMA_LINK.sub(r"- `\1`: \2[\3](#\1)", response["description"])
    lines = ["## Stream events", "", description, ""]
    for name, ref in events.items():
        schema = ref["$ref"].removeprefix(REF)
        example = document["components"]["schemas"][schema]["examples"][0]
        lines += [f"### `{name}`", "", f"`data:` is a `{schema}`:", "", *_json(example), ""]
    return lines


def markdown(document: dict[str, Any]) -> str:
    lines = [HEADER]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            by_tag.setdefault(operation.get("tags", ["other"])[0], []).append(
                (method, path, operation)
            )
    for tag, operations in by_tag.items():
        lines += [f"## {tag.capitalize()}", ""]
        for method, path, operation in operations:
            lines += _operation(document, method, path, operation)
    lines += _stream_events(document)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown(offline_document()))
