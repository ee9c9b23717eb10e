"""Rule templates: Jinja2's immutable sandbox, strict about undefined names."""

from __future__ import annotations

from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from notifyhub.errors import InvalidInput

_ENV = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


class RenderError(Exception):
    """A template failed at event time (the event's recipients of it are skipped)."""


def check(source: str, field: str) -> None:
    """Compile a template at rule creation: a syntax error is the client's (422)."""
    try:
        _ENV.from_string(source)
    except TemplateError as exc:
        raise InvalidInput(f"{field}: invalid template: {exc}") from exc


def render(source: str, context: dict[str, Any]) -> str:
    try:
        return _ENV.from_string(source).render(**context)
    except (TemplateError, TypeError, ValueError, ArithmeticError) as exc:
        raise RenderError(str(exc)) from exc
