"""Inbox views (tabs): named filters over a user's notifications, the tenant's (for every
user of the tenant) and each user's own, with counts kept exact by the inbox scripts.

A view's filter is over what a notification carries for good (categories, severity,
tags), so which views a copy is in is decided once, when it is stored (or when the views
change: lua/views.lua), and every later change moves the counts of exactly those views.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from notifyhub.domain.notification import SEVERITY_RANK, Severity

VIEWS_PER_TENANT = 10
VIEWS_PER_USER = 10
"""A user's own views, on top of the tenant's."""

Scope = Literal["tenant", "personal"]


@dataclass(frozen=True, slots=True)
class ViewFilter:
    """All of what is given must hold: one of `categories`, one of `tags_any`, every one
    of `tags_all`, a severity at least `severity_at_least`."""

    categories: tuple[str, ...] = ()
    tags_any: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    severity_at_least: Severity | None = None

    def holds(self, category: str | None, severity: Severity, tags: set[str]) -> bool:
        if self.categories and (category or "") not in self.categories:
            return False
        if self.tags_any and not tags.intersection(self.tags_any):
            return False
        if not tags.issuperset(self.tags_all):
            return False
        least = self.severity_at_least
        return least is None or SEVERITY_RANK[severity] >= SEVERITY_RANK[least]

    def to_json(self) -> dict[str, object]:
        """The filter as stored and shown: only what is set."""
        out: dict[str, object] = {}
        for name in ("categories", "tags_any", "tags_all"):
            if value := getattr(self, name):
                out[name] = list(value)
        if self.severity_at_least is not None:
            out["severity_at_least"] = self.severity_at_least.value
        return out

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> ViewFilter:
        def strings(name: str) -> tuple[str, ...]:
            value = raw.get(name) or ()
            return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()

        severity = raw.get("severity_at_least")
        return cls(
            strings("categories"),
            strings("tags_any"),
            strings("tags_all"),
            Severity(str(severity)) if severity else None,
        )


@dataclass(frozen=True, slots=True)
class View:
    name: str
    filter: ViewFilter
    scope: Scope
    label: str | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ViewSet:
    """One (tenant, owner)'s views and the version they are at (0: never had any)."""

    version: int = 0
    views: tuple[View, ...] = field(default=())

    def lines(self) -> str:
        return view_lines(self.views)

    def names(self) -> set[str]:
        return {view.name for view in self.views}

    def mask(self, category: str | None, severity: Severity, tags: Sequence[str]) -> int:
        """Which of these views a notification is in: bit k for the k-th view (as
        lua/common.lua `view_mask` reads the same lines)."""
        held = set(tags)
        return sum(
            1 << k
            for k, view in enumerate(self.views)
            if view.filter.holds(category, severity, held)
        )


def view_line(view: View) -> str:
    """One view as lua/common.lua reads it: name, categories, severity rank, tags_any,
    tags_all, tab-separated (names, categories and tags hold no tab, newline or comma)."""
    f = view.filter
    rank = SEVERITY_RANK[f.severity_at_least] if f.severity_at_least else 0
    parts = (
        view.name,
        ",".join(f.categories),
        str(rank),
        ",".join(f.tags_any),
        ",".join(f.tags_all),
    )
    return "\t".join(parts)


def view_lines(views: Sequence[View]) -> str:
    return "\n".join(view_line(view) for view in views)
