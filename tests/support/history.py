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


def table(verdicts: list[Verdict]) -> str:
    """A Markdown table, one row per scenario and workload."""
    rows = [
        "| scenario | workload | acknowledged | delivered | duplicated | lost |",
        "|---|---|---:|---:|---:|---:|",
    ]
    rows += [
        f"| {v.scenario} | {v.workload} | {v.acknowledged} | {v.delivered} | "
        f"{v.duplicated} | {v.lost} |"
        for v in verdicts
    ]
    return "\n".join(rows)


def replace_table(document: str, verdicts: list[Verdict], note: str) -> str:
    """The document with the text between the table markers replaced by a fresh table."""
    head, start, rest = document.partition(TABLE_START)
    _, end, tail = rest.partition(TABLE_END)
    if not start or not end:
        raise ValueError(f"the document has no {TABLE_START} ... {TABLE_END} section")
    return f"{head}{TABLE_START}\n{note}\n\n{table(verdicts)}\n{TABLE_END}{tail}"
