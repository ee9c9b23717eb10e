"""Rule templates: Jinja2's immutable sandbox under a CPU and memory budget.

    save   check():  parse ─► static limits ─► 422 for what is hostile on its face
                     (nested loops over literal ranges, huge literal repeats and widths)
    event  render(): every loop step, call and operator charged to a `Budget`, sizes
                     capped, output counted ─► RenderError (listed in the event's 202)
           render_message(): a notification's title and body, made what a published
                     one may hold (one printable line; printable text)

The budget mechanics live in services/sandbox.py.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator
from typing import Any

from jinja2 import Template, TemplateError, nodes

from notifyhub.domain.notification import CONTROL, CONTROL_BUT_WHITESPACE
from notifyhub.errors import InvalidInput
from notifyhub.services.sandbox import (
    MAX_CHARS,
    MAX_RANGE,
    MAX_STEPS,
    Budget,
    BudgetedSandbox,
    BudgetExceeded,
    check_binop,
    check_widths,
)

__all__ = ["Budget", "RenderError", "check", "render", "render_html", "render_message"]

TITLE_CHARS, BODY_CHARS = 200, 4000
"""A notification's title and body at most (api/schemas/notifications.py)."""

_ENV = BudgetedSandbox()
_HTML_ENV = BudgetedSandbox(autoescape=True)
"""HTML templates (e-mails' `html`): every value is escaped where it is written, so a
notification's title cannot add markup or links; `|safe` marks a value as HTML."""
_WIDTH_FILTERS = frozenset({"center", "indent"})
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})


class RenderError(Exception):
    """A template failed at event time (the event's recipients of it are skipped)."""


def check(source: str, field: str) -> None:
    """At rule creation: a syntax error, or a template that would exceed the budget on
    its face, is the client's (422)."""
    try:
        problem = _static_problem(_ENV.parse(source))
        _compiled(source)
    except TemplateError as exc:
        raise InvalidInput(f"{field}: invalid template: {exc}") from exc
    if problem is not None:
        raise InvalidInput(f"{field}: template refused: {problem}")


def render(source: str, context: dict[str, Any], budget: Budget | None = None) -> str:
    """Render within `budget` (one of its own by default; an event shares one across
    its templates), at most MAX_CHARS of output."""
    return _render(_compiled(source), context, budget)


def render_html(source: str, context: dict[str, Any], budget: Budget | None = None) -> str:
    """`render` for HTML: values are escaped (`<`, `&`, quotes) unless marked `|safe`."""
    return _render(_compiled_html(source), context, budget)


def render_message(
    title: str, body: str, context: dict[str, Any], budget: Budget | None = None
) -> tuple[str, str]:
    """A notification's title and body rendered, held to what a publish may send: control
    characters (line breaks too, in the title) become spaces and lone surrogates U+FFFD,
    cut to TITLE_CHARS and BODY_CHARS. An event's data is the sender's text, so a line
    break in it is not a reason to refuse the event. The title may come out empty."""
    rendered_title = _printable(render(title, context, budget), CONTROL)
    rendered_body = _printable(render(body, context, budget), CONTROL_BUT_WHITESPACE)
    return rendered_title.strip()[:TITLE_CHARS], rendered_body[:BODY_CHARS]


def _printable(text: str, control: re.Pattern[str]) -> str:
    return control.sub(_replacement, text)


def _replacement(found: re.Match[str]) -> str:
    """U+FFFD for a lone surrogate (the patterns' only characters past U+009F), else a
    space."""
    return "\ufffd" if found[0] >= "\ud800" else " "


def _render(template: Template, context: dict[str, Any], budget: Budget | None) -> str:
    try:
        with (budget or Budget()).running():
            return _collect(template.generate(**context))
    except RecursionError as exc:
        raise RenderError("template recursed too deep") from exc
    except (TemplateError, TypeError, ValueError, ArithmeticError) as exc:
        raise RenderError(str(exc)) from exc


def _collect(chunks: Iterator[str]) -> str:
    out: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_CHARS:
            raise BudgetExceeded(f"template output is longer than {MAX_CHARS} characters")
        out.append(chunk)
    return "".join(out)


@functools.lru_cache(maxsize=512)
def _compiled(source: str) -> Template:
    """Compiled once per source: a rule fires many times."""
    return _ENV.from_string(_ENV.charged(_ENV.parse(source)))


@functools.lru_cache(maxsize=128)
def _compiled_html(source: str) -> Template:
    """As `_compiled`, escaping every value it writes."""
    return _HTML_ENV.from_string(_HTML_ENV.charged(_HTML_ENV.parse(source)))


# --- the static check ----------------------------------------------------------------


def _static_problem(template: nodes.Template) -> str | None:
    """Why this template would exceed the budget whatever its data, or None."""
    steps = _loop_steps(template.body, 1)
    if steps > MAX_STEPS:
        return f"its loops run {_count(steps)} times; at most {MAX_STEPS} loop steps"
    for node in template.find_all((nodes.Call, nodes.Filter, nodes.BinExpr)):
        problem = _node_problem(node)
        if problem is not None:
            return problem
    return None


def _count(steps: float) -> str:
    return "more than 10^18" if math.isinf(steps) else f"{steps:,.0f}"


def _loop_steps(body: list[nodes.Node], outer: float) -> float:
    """The most loop steps any nesting of literal ranges in `body` takes."""
    most = 0.0
    for node in body:
        for loop in _outermost_loops(node):
            inner = outer * _literal_length(loop.iter)
            most = max(most, inner, _loop_steps(loop.body, inner))
    return most


def _outermost_loops(node: nodes.Node) -> Iterator[nodes.For]:
    if isinstance(node, nodes.For):
        yield node
        return
    for child in node.iter_child_nodes():
        yield from _outermost_loops(child)


def _literal_length(iterable: nodes.Node) -> float:
    """`range(...)` with literal arguments: its length; any other iterable counts 1."""
    if not (
        isinstance(iterable, nodes.Call)
        and isinstance(iterable.node, nodes.Name)
        and iterable.node.name == "range"
        and iterable.args
        and all(isinstance(a, nodes.Const) and isinstance(a.value, int) for a in iterable.args)
    ):
        return 1
    try:
        return len(range(*(a.value for a in iterable.args)))  # type: ignore[attr-defined]
    except (ValueError, OverflowError):
        return math.inf


def _node_problem(node: nodes.Node) -> str | None:
    try:
        if isinstance(node, nodes.BinExpr):
            left, right = _literal(node.left), _literal(node.right)
            if left is not None and right is not None:
                check_binop(node.operator, left, right)
        elif isinstance(node, nodes.Call):
            _check_call_literals(node)
        elif isinstance(node, nodes.Filter) and node.name in _WIDTH_FILTERS:
            _check_ints(node.args)
    except BudgetExceeded as exc:
        return str(exc)
    return None


def _check_call_literals(node: nodes.Call) -> None:
    if isinstance(node.node, nodes.Name) and node.node.name == "range":
        if _literal_length(node) > MAX_RANGE:
            raise BudgetExceeded(f"range() is limited to {MAX_RANGE} items")
    elif isinstance(node.node, nodes.Getattr) and node.node.attr in _WIDTH_METHODS:
        _check_ints(node.args)
    elif isinstance(node.node, nodes.Getattr) and node.node.attr == "format":
        spec = _literal(node.node.node)
        if isinstance(spec, str):
            check_widths(spec)


def _check_ints(args: list[nodes.Expr]) -> None:
    for arg in args:
        value = _literal(arg)
        if isinstance(value, int) and value > MAX_CHARS:
            raise BudgetExceeded(f"a literal width of {value} passes {MAX_CHARS}")


def _literal(node: nodes.Node) -> Any:
    """A literal string or number (None for anything else)."""
    if isinstance(node, nodes.Const) and isinstance(node.value, str | int):
        return node.value
    return None
