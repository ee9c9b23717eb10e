"""The fault suite's closing table says what its "lost" column means, where it is printed."""

from __future__ import annotations

import pytest

from faults import conftest as faults
from support.history import TABLE_END, TABLE_START, Verdict, replace_table


class Reporter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def section(self, title: str) -> None:
        self.lines.append(f"== {title}")

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def test_the_table_is_followed_by_the_loss_window_note(monkeypatch: pytest.MonkeyPatch) -> None:
    verdict = Verdict("Redis FLUSHALL", "inbox (REST)", 150, 58, 0, 92)
    monkeypatch.setattr(faults, "REPORT", [verdict])
    monkeypatch.delenv("NOTIFYHUB_RELIABILITY_DOC", raising=False)
    reporter = Reporter()

    faults.pytest_terminal_summary(reporter)

    printed = "\n".join(reporter.lines)
    assert "| Redis FLUSHALL | inbox (REST) | 150 | 58 | 0 | 92 |" in printed
    assert printed.index("| 92 |") < printed.index("documented loss window")
    assert "Redis-only inbox mode" in printed and "NOTIFYHUB_INBOX_DURABILITY=postgres" in printed


def test_a_run_of_some_scenarios_replaces_only_their_rows_in_the_doc() -> None:
    old = [
        Verdict("A", "inbox (REST)", 1, 1, 0, 0),
        Verdict("B", "delayed", 2, 2, 0, 0),
        Verdict("B", "deliveries", 3, 3, 0, 0),
        Verdict("C", "delayed", 4, 4, 0, 0),
    ]
    document = replace_table(f"intro\n{TABLE_START}\n{TABLE_END}\noutro\n", old, "note")
    fresh = [Verdict("B", "deliveries", 30, 30, 2, 0, drain_s=1.25), Verdict("D", "x", 5, 5, 0, 0)]

    rows = [line for line in replace_table(document, fresh, "note").splitlines() if "| " in line]

    assert rows[1:] == [
        "| A | inbox (REST) | 1 | 1 | 0 | 0 |",
        "| B | deliveries; all arrived 1.2 s after the last ack | 30 | 30 | 2 | 0 |",
        "| C | delayed | 4 | 4 | 0 | 0 |",
        "| D | x | 5 | 5 | 0 | 0 |",
    ]
