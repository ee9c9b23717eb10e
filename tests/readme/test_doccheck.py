"""The examples' checker on its own: the convention's parsing, and a shown value that
differs from the answer failing (docs/examples.md)."""

from __future__ import annotations

import pytest

from readme.doccheck import (
    Block,
    ConventionError,
    Output,
    differences,
    expectations,
    output_differences,
    shell_blocks,
    shown_values,
)

# An answer of the hub, as `curl -s` prints it, and a page's block showing it.
ANSWER = (
    '{"items":[{"id":"01M8FQCEGVM4SXSNQP1D9AC42N","title":"Restock location A-12",'
    '"status":"unread","created_at":"2026-11-28T00:02:51.547Z","tags":[]}],'
    '"next_cursor":null,"unread":1}'
)
SHOWN = """{
  "items": [
    {"id": "$ID", "title": "Restock location A-12", "status": "unread",
     "created_at": "2026-…", …}
  ],
  "next_cursor": null,
  "unread": 1
}
"""
VARIABLES = {"ID": "01M8FQCEGVM4SXSNQP1D9AC42N"}


def test_a_block_and_its_output() -> None:
    page = (
        "x\n<!-- doc-test: skip (needs Docker) -->\n```bash\ndocker ps\n```\n"
        '```python\n1\n```\n```bash\ncurl -s x\n```\n\n```json\n{"a": 1}\n```\n'
    )
    assert shell_blocks(page) == [
        Block(1, 4, "docker ps\n", "needs Docker"),
        Block(2, 10, "curl -s x\n", None, Output("json", 14, '{"a": 1}\n')),
    ]


def test_statuses_from_result_comments() -> None:
    block = (
        "KEY=$(cat key)   # the admin key\n"
        "# a service notifies alice\n"
        "curl -s -X POST localhost:8000/v1/x \\\n"
        "  -d '{\"a\": 1}'\n"
        "# 202\n"
        "ID=$(curl -s localhost:8000/v1/y | jq -r .id)\n"
        "curl -s -X DELETE localhost:8000/v1/y/$ID   # 204, or 409 once taken\n"
        "# marks it read\n"
        "curl -s localhost:8000/v1/z\n"
        "# (a note on the answer)\n"
    )
    assert [(e.line, e.statuses) for e in expectations(block)] == [
        (2, ("202",)),
        (5, ()),
        (6, ("204", "409")),
        (8, ()),
    ]


def test_a_value_in_a_comment_is_refused() -> None:
    """Nothing would check it: values go in an output block."""
    with pytest.raises(ConventionError, match=r"a ```json block"):
        expectations('curl -s localhost:8000/v1/z\n# 200 {"unread": 1}\n')


def test_the_shown_output_matches_the_answer() -> None:
    assert output_differences(Output("json", 1, SHOWN), ANSWER, VARIABLES) == []


@pytest.mark.parametrize(
    ("wrong", "named"),
    [
        ('"unread": 1', '"unread": 2'),  # a count
        ("Restock location A-12", "Restock location A-13"),  # a title
        ('"status": "unread"', '"status": "read"'),
    ],
)
def test_a_shown_value_that_differs_fails(wrong: str, named: str) -> None:
    """The drift the page test exists for: one shown value changed is a difference."""
    drifted = SHOWN.replace(wrong, named, 1)
    assert drifted != SHOWN
    found = output_differences(Output("json", 1, drifted), ANSWER, VARIABLES)
    assert found, "a wrong shown value passed"


def test_a_captured_id_is_compared_by_value() -> None:
    found = output_differences(Output("json", 1, SHOWN), ANSWER, {"ID": "01OTHER"})
    assert found == ["$.items[0].id: shown '$ID', got '01M8FQCEGVM4SXSNQP1D9AC42N'"]


def test_keys_and_items_are_exact_unless_elided() -> None:
    assert differences(shown_values('{"a": 1}')[0], {"a": 1, "b": 2}, {}) == [
        "$: the answer has keys the page does not show: ['b'] (add …)"
    ]
    assert differences(shown_values('{"a": 1, …}')[0], {"a": 1, "b": 2}, {}) == []
    assert differences(shown_values("[1, …]")[0], [1, 2, 3], {}) == []
    assert differences(shown_values("[1]")[0], [1, 2], {}) == ["$: shown 1 item(s), got 2"]
    assert differences(shown_values('{"a": "…"}')[0], {"a": {"x": [1]}}, {}) == []
    assert differences(shown_values("[true]")[0], [1], {}) == ["$[0]: shown True, got 1"]


def test_text_output_with_elided_lines() -> None:
    shown = 'retry: 3000\n\nevent: counts\nid: …\ndata: {"unread":1,…}\n…\n'
    got = 'retry: 3000\n\nevent: counts\nid: 1-6b0a\ndata: {"unread":1,"seq":1}\n\n'
    assert output_differences(Output("text", 1, shown), got, {}) == []
    assert output_differences(Output("text", 1, shown.replace("counts", "reset")), got, {})
