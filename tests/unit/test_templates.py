"""Rule templates render as Jinja2 does, within a budget of steps, time and size."""

from __future__ import annotations

import time
from typing import Any

import pytest

from notifyhub.errors import InvalidInput
from notifyhub.services import templates
from notifyhub.services.templates import Budget, RenderError

CONTEXT: dict[str, Any] = {
    "actor": {"type": "user", "id": "ann"},
    "target": {"type": "doc", "id": "d1"},
    "data": {"n": 8000, "items": ["a", "b", "c"], "price": 3.14159, "big": 100_000_000},
}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ actor.id }} edited {{ target.id }}", "ann edited d1"),
        ("{% for x in data['items'] %}{{ loop.index }}{{ x }}{% endfor %}", "1a2b3c"),
        ("{% for x in data['items'] %}{{ loop.length }}{% endfor %}", "333"),
        ("{{ data['items']|join(', ') }} {{ 'x'|center(5) }}|", "a, b, c   x  |"),
        (
            "{{ '%.2f'|format(data.price) }} {{ '%5s' % 'a' }} {{ '{:>4}'.format(7) }}",
            "3.14     a    7",
        ),
        (
            "{{ 'ab'|replace('b', 'c') }}{{ actor.id ~ '/' ~ target.id }}{{ 'ab' * 2 }}",
            "acann/d1abab",
        ),
        ("{{ 2 ** 10 }} {{ range(3)|sum }} Order 123456789", "1024 3 Order 123456789"),
    ],
)
def test_ordinary_templates_render_as_before(source: str, expected: str) -> None:
    templates.check(source, "title")
    assert templates.render(source, CONTEXT) == expected


@pytest.mark.parametrize(
    "source",
    [
        "{% for i in range(8000) %}{% for j in range(8000) %}{{ j }}{% endfor %}{% endfor %}",
        "{% for i in range(200) %}{% for j in range(200) %}{% endfor %}{% endfor %}",
        "{{ 'x' * 100000000 }}",
        "{{ 'x'|center(100000000) }}",
        "{{ 'x'.ljust(100000000) }}",
        "{{ '%100000000s' % 'x' }}",
        "{{ '{:100000000}'.format(1) }}",
        "{{ 9 ** 99999999 }}",
        "{{ range(1000000)|list }}",
    ],
)
def test_hostile_on_its_face_is_refused_at_save(source: str) -> None:
    with pytest.raises(InvalidInput, match="template refused"):
        templates.check(source, "title")


BUDGET_REASONS = (
    "loop steps or calls|took longer than|longer than|more than .* characters|bits"
    "|range\\(\\) is limited|literal width|recursed too deep"
)
"""The budget's refusals (services/sandbox.py, services/templates.py)."""


@pytest.mark.parametrize(
    "source",
    [
        "{% for i in range(data.n) %}{% for j in range(data.n) %}{% endfor %}{% endfor %}",
        "{% for i in range(data.n) %}{{ i }}{{ i }}{% endfor %}",
        "{{ 'x' * data.big }}",
        "{{ 'x'|center(data.big) }}",
        "{{ 'x'|indent(data.big) }}",
        "{{ 'x'.rjust(data.big) }}",
        "{{ '%*d' % (data.big, 1) }}",
        "{{ '{:{}}'.format(1, data.big) }}",
        "{{ '{:>{w}}'.format(1, w=data.big) }}",
        "{{ 9 ** data.big }}",
        "{{ range(data.big) }}",
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}"
        "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}"
        "{% set ns.s = [ns.s, ns.s]|join %}{% endfor %}{{ ns.s }}",
        "{% set ns = namespace(s='xx') %}{% for i in range(40) %}"
        "{% set ns.s = ns.s|replace('x', 'xx') %}{% endfor %}{{ ns.s }}",
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
        "{{ f(40) }}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        # data['items']: `data.items` is the dict's method, whose TypeError stopped it first
        "{% for x in data['items'] recursive %}{{ loop(data['items']) }}{% endfor %}",
    ],
)
def test_hostile_with_its_data_is_stopped_at_render(source: str) -> None:
    """Stopped by the budget (its message names which limit), not left to run until
    something else gives out. A bound on CPU time, far above the 50 ms budget, checks it
    stopped early; this process's CPU, not the wall clock, which a busy machine stretches
    (a clean-clone CI once took 538 ms of wall clock for a render of 5-8 ms)."""
    templates.check(source, "title")  # nothing to see before the data
    started = time.process_time()
    with pytest.raises(RenderError, match=BUDGET_REASONS):
        templates.render(source, CONTEXT)
    assert time.process_time() - started < 0.5


def test_an_event_shares_one_budget_across_its_templates() -> None:
    budget = Budget(steps=10)
    assert templates.render("{% for i in range(6) %}{% endfor %}", CONTEXT, budget) == ""
    with pytest.raises(RenderError, match="loop steps"):
        templates.render("{% for i in range(6) %}{% endfor %}", CONTEXT, budget)


def test_time_counts_only_while_rendering() -> None:
    budget = Budget(seconds=0.05)
    time.sleep(0.06)  # an event's database reads between its renders
    assert templates.render("{{ actor.id }}", CONTEXT, budget) == "ann"
