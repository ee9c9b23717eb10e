"""The fault suite's closing table says what its "lost" column means, where it is printed."""

from __future__ import annotations

import pytest

from faults import conftest as faults
from support.history import Verdict


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
