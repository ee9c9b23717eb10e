"""A digest's summary (services/digests.summary): what its e-mail and push templates get."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from notifyhub.db.models import Digest as DigestRow
from notifyhub.services.digests import SHOWN_LINES, summary


def _digest() -> DigestRow:
    opened = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    return DigestRow(id="D1", tenant="t", user_id="u", key="k", opened_at=opened)


def _items(n: int) -> list[dict[str, Any]]:
    """n items, the latest first, as the worker reads them."""
    return [
        {"id": f"n{i}", "title": f"comment {i}", "actor": {"id": f"a{i % 3}"}}
        for i in reversed(range(n))
    ]


def test_actors_appear_once_each_the_latest_first_and_items_without_one_are_skipped() -> None:
    items = [*_items(5), {"id": "x", "title": "no actor"}]
    actors = summary(_digest(), items)["digest"]["actors"]
    assert [a["id"] for a in actors] == ["a1", "a0", "a2"]


def test_the_digest_is_as_severe_as_its_worst_item_and_info_by_default() -> None:
    items = _items(3)
    assert summary(_digest(), items)["notification"]["severity"] == "info"
    items[1]["severity"] = "error"
    items[2]["severity"] = "warning"
    assert summary(_digest(), items)["notification"]["severity"] == "error"


def test_the_body_lists_the_latest_items_and_counts_the_rest() -> None:
    items = _items(SHOWN_LINES + 5)
    shown = summary(_digest(), items)
    lines = shown["notification"]["body"].split("\n")
    assert lines[0] == f"- comment {SHOWN_LINES + 4}"
    assert lines[-1] == "... and 5 more"
    assert len(lines) == SHOWN_LINES + 1
    assert shown["notification"]["title"] == f"{SHOWN_LINES + 5} new: comment {SHOWN_LINES + 4}"
    assert shown["digest"]["count"] == SHOWN_LINES + 5
    assert shown["digest"]["items"] == items
