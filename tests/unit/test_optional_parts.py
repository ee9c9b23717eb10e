"""`make test` names the missing optional programs once, and folds their skips."""

from __future__ import annotations

import pytest

from support import optional


def _skip(reason: str, line: int) -> pytest.TestReport:
    return pytest.TestReport(
        "tests/e2e/test_x.py::test_y", ("tests/e2e/test_x.py", line, "test_y"), {},
        "skipped", ("tests/e2e/test_x.py", line, reason), "setup",
    )  # fmt: skip


def test_a_missing_part_is_named_with_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOTIFYHUB_TEST_CHROMIUM", "/nonexistent/chromium")
    header = "\n".join(optional.header())
    assert "Chromium: the browser tests (tests/e2e) skip" in header
    assert "apt-get install chromium" in header


def test_skips_for_a_missing_part_fold_into_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFYHUB_TEST_CHROMIUM", "/nonexistent/chromium")
    reports = [_skip("Skipped: browser tests need Chromium at /x", line) for line in (3, 9)]
    for report in reports:
        optional.fold(report)
    assert len({report.longrepr for report in reports}) == 1
    other = _skip("Skipped: something else", 5)
    optional.fold(other)
    assert other.longrepr == ("tests/e2e/test_x.py", 5, "Skipped: something else")
