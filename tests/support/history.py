"""Jepsen-style histories: what clients were told was accepted, what arrived, the verdict."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

TABLE_START = "<!-- fault-table:start -->"
TABLE_END = "<!-- fault-table:end -->"


@dataclass
class History:
    """One workload's record: acknowledged ids and every arrival of an id."""

    workload: str
    acknowledged: set[str] = field(default_factory=set)
    arrivals: Counter[str] = field(default_factory=Counter)

    def ack(self, item_id: str) -> None:
        self.acknowledged.add(item_id)

    def arrived(self, item_id: str) -> None:
        self.arrivals[item_id] += 1

    def missing(self) -> set[str]:
        return {i for i in self.acknowledged if self.arrivals[i] == 0}

    def verdict(self, scenario: str) -> Verdict:
        acked = self.acknowledged
        delivered = sum(1 for i in acked if self.arrivals[i] >= 1)
        duplicated = sum(1 for i in acked if self.arrivals[i] > 1)
        lost = sorted(self.missing())
        return Verdict(scenario, self.workload, len(acked), delivered, duplicated, len(lost), lost)


@dataclass(frozen=True)
class Verdict:
    """Each acknowledged id is delivered (>= 1 arrival; duplicated if > 1) or lost."""

    scenario: str
    workload: str
    acknowledged: int
    delivered: int
    duplicated: int
    lost: int
    lost_ids: list[str] = field(repr=False, default_factory=list)
    drain_s: float | None = None
    """Where a scenario times it: from the last acknowledgment until every acknowledged
    id had arrived (shown beside the workload)."""

    @property
    def shown_workload(self) -> str:
        if self.drain_s is None:
            return self.workload
        return f"{self.workload}; all arrived {self.drain_s:.1f} s after the last ack"


def table(verdicts: list[Verdict]) -> str:
    """A Markdown table, one row per scenario and workload."""
    rows = [
        "| scenario | workload | acknowledged | delivered | duplicated | lost |",
        "|---|---|---:|---:|---:|---:|",
    ]
    rows += [
        f"| {v.scenario} | {v.shown_workload} | {v.acknowledged} | {v.delivered} | "
        f"{v.duplicated} | {v.lost} |"
        for v in verdicts
    ]
    return "\n".join(rows)


def _scenario(row: str) -> str:
    return row[2:].split(" | ", 1)[0]


def replace_table(document: str, verdicts: list[Verdict], note: str) -> str:
    """The document with a fresh table between the markers: this run's rows replace the
    rows of the scenarios it ran, where those stood; other scenarios' rows stay as they
    were (so one scenario may run alone); a new scenario's rows go last."""
    head, start, rest = document.partition(TABLE_START)
    section, end, tail = rest.partition(TABLE_END)
    if not start or not end:
        raise ValueError(f"the document has no {TABLE_START} ... {TABLE_END} section")
    lines = table(verdicts).split("\n")
    header, fresh = lines[:2], lines[2:]
    owed: dict[str, list[str]] = {}
    for row in fresh:
        owed.setdefault(_scenario(row), []).append(row)
    rows: list[str] = []
    old = [line for line in section.splitlines() if line.startswith("| ")][1:]  # past the head
    for row in old:
        if _scenario(row) not in owed:
            rows.append(row)
        else:
            rows += owed[_scenario(row)]
            owed[_scenario(row)] = []
    rows += [row for left in owed.values() for row in left]
    body = "\n".join([*header, *rows])
    return f"{head}{TABLE_START}\n{note}\n\n{body}\n{TABLE_END}{tail}"
