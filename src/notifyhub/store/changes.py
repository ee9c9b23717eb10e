"""The change log's closed set: each entry type a user's log holds, decoded into a typed
entry that knows its SSE event.

Every inbox script appends change entries (lua/common.lua `append`): JSON objects with
`type`, `seq`, `id`, `counts` and the type's own fields. `CHANGE_TYPES` is the one table
from a type to its entry class; an entry of any other type is an error
(`UnknownChangeType`), never guessed at: a stream that met one would otherwise send
something the client cannot act on (an unknown type once became a `delete`).

    NotifyhubError
    └── ChangeLogError          an entry this code cannot read
        └── UnknownChangeType   ... because its type is not in CHANGE_TYPES
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Final

import orjson

from notifyhub.domain.notification import from_ms, to_rfc3339
from notifyhub.errors import NotifyhubError
from notifyhub.store.items import item_json


class ChangeType(StrEnum):
    """The `type` of a change-log entry; also the SSE event it becomes."""

    NOTIFICATION = "notification"
    UPDATE = "update"
    DELETE = "delete"
    VIEWS = "views"
    """The user's views were defined, changed or removed: only the counts after it are
    sent (a `counts` event carrying every view's)."""


class ChangeLogError(NotifyhubError):
    """A change-log entry this code cannot read (malformed, or written by newer code)."""


class UnknownChangeType(ChangeLogError):
    """A change-log entry whose `type` is not a `ChangeType`."""


@dataclass(frozen=True, slots=True)
class LoggedCounts:
    """The user's counts right after the change (every entry carries them)."""

    unread: int
    unseen: int
    total: int
    views: Mapping[str, ViewCounts] | None = None
    """Per view of the user's: (unread, unseen, total); None when they have none."""


ViewCounts = tuple[int, int, int]
"""A view's (unread, unseen, total)."""


def view_counts(names: str, counters: str) -> dict[str, ViewCounts]:
    """Views' counts as the scripts log them (lua/common.lua `logged_counts`): names
    'a;b' and per view 'total,unread,unseen', ';'-separated, in slot order (a slot
    missing: zeros)."""
    found = [part.split(",") for part in counters.split(";") if part]
    out: dict[str, ViewCounts] = {}
    for i, name in enumerate(names.split(";")):
        total, unread, unseen = found[i] if i < len(found) else ("0", "0", "0")
        out[name] = (int(unread), int(unseen), int(total))
    return out


def _time(ms: int) -> str | None:
    return to_rfc3339(from_ms(ms)) if ms else None


def _counts(raw: Mapping[str, Any]) -> LoggedCounts:
    names = raw.get("vn")
    if not names:
        return LoggedCounts(raw["unread"], raw["unseen"], raw["total"])
    views = view_counts(names, raw.get("vc") or "")
    return LoggedCounts(raw["unread"], raw["unseen"], raw["total"], views)


@dataclass(frozen=True, slots=True)
class NotificationChange:
    """A new copy (placed, or a pending copy placed later). `quiet`: stored without a live
    event (a pull copy, or the user's preferences turned push off); `replaces`: the id of
    the copy with the same collapse key that this one replaced."""

    type: ClassVar[ChangeType] = ChangeType.NOTIFICATION
    seq: int
    id: str
    counts: LoggedCounts
    quiet: bool = False
    replaces: str | None = None
    resurfaced: bool = False
    """A snoozed copy whose time came (lua/resurface.lua), not a new one."""

    @classmethod
    def from_log(cls, raw: Mapping[str, Any]) -> NotificationChange:
        replaces = raw.get("replaces")
        return cls(
            raw["seq"],
            raw["id"],
            _counts(raw["counts"]),
            bool(raw.get("quiet")),
            None if replaces is None else str(replaces),
            bool(raw.get("resurfaced")),
        )

    def event_data(self, content: bytes | None, state: bytes | None) -> bytes | None:
        """The item as it is now; None when it was deleted since, or the copy is quiet
        (the counts after it are still sent)."""
        if content is None or state is None or self.quiet:
            return None
        return item_json(content, state, replaces=self.replaces, resurfaced=self.resurfaced)

    def replaced_data(self) -> bytes | None:
        """A `delete` event's data for the copy this one replaced, to send when this one
        sends none (deleted or replaced again since it was logged, or quiet): a client
        still showing the replaced copy drops it, as no later change names it (a second
        replacement names this one). None when it replaced nothing."""
        return None if self.replaces is None else orjson.dumps({"id": self.replaces})


@dataclass(frozen=True, slots=True)
class UpdateChange:
    """An item's state changed: read/seen (mark, read-all), archived or pinned (entries
    logged before archiving existed have neither: false), or an action was completed (the
    event then carries `completed`)."""

    type: ClassVar[ChangeType] = ChangeType.UPDATE
    seq: int
    id: str
    counts: LoggedCounts
    read_at_ms: int
    seen: bool
    archived: bool = False
    pinned: bool = False
    snoozed_until_ms: int = 0
    """0: not snoozed."""
    action: str | None = None
    """Set by the entry of an action's completion (lua/act.lua): the action's id."""
    completed_ms: int = 0
    """... and when it was completed."""
    thread: bool = False
    """An activity joined the thread (lua/common.lua `join`): the event is the whole item,
    as it now is (content and summary changed, not only its state)."""

    @classmethod
    def from_log(cls, raw: Mapping[str, Any]) -> UpdateChange:
        counts = _counts(raw["counts"])
        if raw.get("thread"):  # a join's entry carries no state: its event is the whole item
            return cls(raw["seq"], raw["id"], counts, 0, False, thread=True)
        flags = bool(raw.get("archived")), bool(raw.get("pinned")), int(raw.get("snoozed") or 0)
        action = raw.get("action")
        completed_ms = int(str(raw["completed"]).partition("@")[2]) if action else 0
        return cls(
            raw["seq"],
            raw["id"],
            counts,
            int(raw["read_at"]),
            bool(raw["seen"]),
            *flags,
            None if action is None else str(action),
            completed_ms,
        )

    def event_data(self, content: bytes | None, state: bytes | None) -> bytes | None:
        if self.thread:  # None when the thread was deleted since (its delete follows)
            return None if content is None or state is None else item_json(content, state)
        read_at = self.read_at_ms
        data: dict[str, Any] = {
            "id": self.id,
            "status": "read" if read_at else "unread",
            "seen": self.seen,
            "read_at": to_rfc3339(from_ms(read_at)) if read_at else None,
            "archived": self.archived,
            "pinned": self.pinned,
            "snoozed_until": _time(self.snoozed_until_ms),
        }
        if self.action is not None:  # other updates leave `completed` as it was
            data["completed"] = {"action": self.action, "completed_at": _time(self.completed_ms)}
        return orjson.dumps(data)


@dataclass(frozen=True, slots=True)
class DeleteChange:
    """An item left the inbox (deleted, recalled, expired, evicted, replaced)."""

    type: ClassVar[ChangeType] = ChangeType.DELETE
    seq: int
    id: str
    counts: LoggedCounts

    @classmethod
    def from_log(cls, raw: Mapping[str, Any]) -> DeleteChange:
        return cls(raw["seq"], raw["id"], _counts(raw["counts"]))

    def event_data(self, content: bytes | None, state: bytes | None) -> bytes | None:
        return orjson.dumps({"id": self.id})


@dataclass(frozen=True, slots=True)
class ViewsChange:
    """The user's views changed (lua/views.lua): nothing to send but the counts after it."""

    type: ClassVar[ChangeType] = ChangeType.VIEWS
    seq: int
    id: str
    counts: LoggedCounts

    @classmethod
    def from_log(cls, raw: Mapping[str, Any]) -> ViewsChange:
        return cls(raw["seq"], "", _counts(raw["counts"]))

    def event_data(self, content: bytes | None, state: bytes | None) -> bytes | None:
        return None


ChangeEntry = NotificationChange | UpdateChange | DeleteChange | ViewsChange

CHANGE_TYPES: Final[Mapping[ChangeType, Callable[[Mapping[str, Any]], ChangeEntry]]] = {
    ChangeType.NOTIFICATION: NotificationChange.from_log,
    ChangeType.UPDATE: UpdateChange.from_log,
    ChangeType.DELETE: DeleteChange.from_log,
    ChangeType.VIEWS: ViewsChange.from_log,
}
"""How each change type is read from the log; its class says what event it becomes."""


def decode_entry(raw: bytes) -> ChangeEntry:
    """One change-log entry, typed; `ChangeLogError` for one this code cannot read."""
    fields = orjson.loads(raw)
    try:
        decode = CHANGE_TYPES[ChangeType(fields["type"])]
    except (KeyError, ValueError, TypeError) as exc:
        raise UnknownChangeType(f"change-log entry of unknown type: {raw[:200]!r}") from exc
    try:
        return decode(fields)
    except (KeyError, ValueError, TypeError) as exc:
        raise ChangeLogError(f"malformed change-log entry: {raw[:200]!r}") from exc


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of a log read, with the item's content and state when the entry is a
    notification whose item still exists (lua/changes.lua)."""

    entry: ChangeEntry
    content: bytes | None
    state: bytes | None


@dataclass(frozen=True, slots=True)
class Changes:
    """A log read: the user's seq, the oldest seq the log still holds, the seq's epoch
    (lua/common.lua `epoch`; '' for seqs older than epochs) and the entries read."""

    seq: int
    oldest_logged: int
    epoch: str
    entries: list[Change]
