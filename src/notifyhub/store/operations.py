"""The inbox's operations, a closed set, and the one table of what each does.

Per operation: its Lua script, the change entries it appends (each becomes its SSE
event, see store/changes.py) and, in durable inbox mode, what is logged to PostgreSQL and
how it is replayed after Redis lost data (services/durable.py).

Adding an operation: a member of `Operation`, its row in `OPERATIONS`, its script in
lua/ with its codec (store/codecs.py) and `InboxStore` method, and, when it is logged, a
`LoggedOp` subclass whose `replay` calls that method. A logged operation of any other
kind is an error (`UnknownOperation`), never skipped.

    NotifyhubError
    └── LoggedOpError        a logged operation this code cannot replay
        └── UnknownOperation ... because its kind is not a logged `Operation`
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from notifyhub.errors import NotifyhubError
from notifyhub.store.changes import ChangeType

if TYPE_CHECKING:
    from notifyhub.store.inbox import InboxStore


class Operation(StrEnum):
    PLACE = "place"
    DEFER = "defer"
    PLACE_PENDING = "place_pending"
    MARK = "mark"
    MARK_ALL = "mark_all"
    REMOVE = "remove"
    PURGE = "purge"
    RECALL = "recall"
    RESURFACE = "resurface"
    ACT = "act"
    SYNC_VIEWS = "sync_views"


class LoggedOpError(NotifyhubError):
    """A logged operation this code cannot replay (malformed, or written by newer code)."""


class UnknownOperation(LoggedOpError):
    """A logged operation whose `kind` is not an `Operation` that is logged."""


class LoggedOp(BaseModel):
    """One operation as durable inbox mode logs it (`inbox_changes.op`, JSON with `kind`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: ClassVar[Operation]
    added_later: ClassVar[frozenset[str]] = frozenset()
    """Fields added after the operation was first logged: left out of its JSON while at
    their defaults, so it is logged exactly as before they existed."""

    def to_json(self) -> dict[str, Any]:
        unset = {
            f for f in self.added_later if getattr(self, f) == type(self).model_fields[f].default
        }
        return {"kind": self.kind.value, **self.model_dump(mode="json", exclude=unset)}

    async def replay(self, store: InboxStore, tenant: str, user: str) -> None:
        """Apply it again through the normal inbox writes (idempotent)."""
        raise NotImplementedError


class MarkOp(LoggedOp):
    kind: ClassVar[Operation] = Operation.MARK
    ids: list[str]
    read: bool | None
    seen: bool
    archived: bool | None = None
    pinned: bool | None = None
    snooze_until_ms: int | None = None
    """Snoozed until then; 0 (`codecs.UNSNOOZE`) unsnoozes; None: unchanged."""
    added_later: ClassVar[frozenset[str]] = frozenset({"archived", "pinned", "snooze_until_ms"})

    async def replay(self, store: InboxStore, tenant: str, user: str) -> None:
        await store.mark(
            tenant,
            user,
            self.ids,
            read=self.read,
            seen=self.seen,
            archived=self.archived,
            pinned=self.pinned,
            snooze_until_ms=self.snooze_until_ms,
        )


class MarkAllOp(LoggedOp):
    kind: ClassVar[Operation] = Operation.MARK_ALL
    category: str | None
    before_id: str | None
    """Logged with a bound even for "everything": replayed later, it means up to then."""
    action: Literal["read", "archive"] = "read"
    view_line: str | None = None
    """Only a view's copies: its definition as the user had it then (lua/common.lua's line,
    its name first), replayed on content, since after a Redis loss the copies' view bits
    are not synced yet and the view may have changed since."""
    added_later: ClassVar[frozenset[str]] = frozenset({"action", "view_line"})

    async def replay(self, store: InboxStore, tenant: str, user: str) -> None:
        await store.mark_all(
            tenant,
            user,
            category=self.category,
            before_id=self.before_id,
            action=self.action,
            view_line=self.view_line,
        )


class RemoveOp(LoggedOp):
    kind: ClassVar[Operation] = Operation.REMOVE
    ids: list[str]

    async def replay(self, store: InboxStore, tenant: str, user: str) -> None:
        await store.remove(tenant, user, self.ids)


class RecallOp(LoggedOp):
    """A producer recalled a notification from every holder in its tenant (user '')."""

    kind: ClassVar[Operation] = Operation.RECALL
    id: str

    async def replay(self, store: InboxStore, tenant: str, user: str) -> None:
        for holder_tenant, holder in await store.recipients(self.id):
            if holder_tenant == tenant:
                await store.recall(holder_tenant, holder, self.id)
        await store.forget(self.id)


class ResurfaceOp(LoggedOp):
    """A snoozed copy's time came (logged, so a replay after a Redis loss does not leave it
    snoozed for good: its wake-up was consumed)."""

    kind: ClassVar[Operation] = Operation.RESURFACE
    id: str
    until_ms: int

    async def replay(self, store: InboxStore, tenant: str, user: str) -> None:
        await store.resurface(tenant, user, self.id, self.until_ms)


class ActOp(LoggedOp):
    """A user completed one of their copy's actions (the `index`-th, `action`) at `at_ms`:
    replayed with that time, so the copy shows the same outcome after a rebuild."""

    kind: ClassVar[Operation] = Operation.ACT
    id: str
    index: int
    action: str
    at_ms: int
    activity: str = ""
    """A thread's: the activity whose actions were shown (a later one joining since makes
    the replay a no-op, as the join cleared the completion)."""
    added_later: ClassVar[frozenset[str]] = frozenset({"activity"})

    async def replay(self, store: InboxStore, tenant: str, user: str) -> None:
        at, activity = self.at_ms, self.activity
        await store.act(tenant, user, self.id, self.index, self.action, at_ms=at, activity=activity)


@dataclass(frozen=True, slots=True)
class OperationSpec:
    script: str
    """Its script, lua/<script>.lua (run after lua/common.lua)."""
    appends: tuple[ChangeType, ...]
    """The change entries it appends itself (every script first places pending copies
    and purges expired ones: `notification` and `delete` entries)."""
    logged: type[LoggedOp] | None = None
    """Durable inbox mode: its log entry, replayed after a Redis loss. None: not logged
    (copies are logged whole before the 202; expiry and evictions happen again)."""


_N, _U, _D, _V = ChangeType.NOTIFICATION, ChangeType.UPDATE, ChangeType.DELETE, ChangeType.VIEWS

OPERATIONS: Final[Mapping[Operation, OperationSpec]] = {
    Operation.PLACE: OperationSpec("place", (_N, _D)),  # _D: evictions, collapse
    Operation.DEFER: OperationSpec("defer", ()),  # copies appear when placed
    Operation.PLACE_PENDING: OperationSpec("place_pending", (_N, _D)),
    Operation.MARK: OperationSpec("mark", (_U,), MarkOp),
    Operation.MARK_ALL: OperationSpec("mark_all", (_U,), MarkAllOp),
    Operation.REMOVE: OperationSpec("remove", (_D,), RemoveOp),
    Operation.PURGE: OperationSpec("purge", (_D,)),
    Operation.RECALL: OperationSpec("recall", (_U, _D), RecallOp),  # per holder
    Operation.RESURFACE: OperationSpec("resurface", (_N,), ResurfaceOp),
    Operation.ACT: OperationSpec("act", (_U,), ActOp),
    # Not logged: after a Redis loss the next read syncs the user's views again.
    Operation.SYNC_VIEWS: OperationSpec("views", (_V,)),
}

_LOGGED: Final[Mapping[str, type[LoggedOp]]] = {
    op.value: spec.logged for op, spec in OPERATIONS.items() if spec.logged is not None
}


def decode_logged(raw: Mapping[str, Any]) -> LoggedOp:
    """A logged operation, typed; `LoggedOpError` for one this code cannot replay."""
    fields = dict(raw)
    kind = fields.pop("kind", None)
    logged = _LOGGED.get(kind) if isinstance(kind, str) else None
    if logged is None:
        raise UnknownOperation(f"logged inbox operation of unknown kind: {kind!r}")
    try:
        return logged.model_validate(fields)
    except ValidationError as exc:
        raise LoggedOpError(f"malformed logged {kind} operation: {exc}") from exc
