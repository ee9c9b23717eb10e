"""A user's own inbox: list, poll, count, mark and delete. The user comes from the token;
in durable inbox mode each change is logged as its `LoggedOp` (store/operations.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ulid import ULID

from notifyhub.domain.auth import UserPrincipal
from notifyhub.domain.notification import Counts, InboxItem, InboxPage, Severity, to_ms
from notifyhub.errors import InvalidInput, LimitReached, NotFound
from notifyhub.services.durable import DurableInbox
from notifyhub.store.inbox import InboxStore, ListStatus, PageQuery
from notifyhub.store.operations import LoggedOp, MarkAllOp, MarkOp, RemoveOp


@dataclass(frozen=True, slots=True)
class ListRequest:
    status: ListStatus = "all"
    category: str | None = None
    limit: int = 20
    cursor: str | None = None
    since: datetime | None = None
    pinned: bool = False
    tags_any: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    severity_at_least: Severity | None = None
    actor: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


@dataclass(frozen=True, slots=True)
class StateChange:
    """What one PATCH changes (None: unchanged)."""

    read: bool | None = None
    seen: bool = False
    archived: bool | None = None
    pinned: bool | None = None


def ulid_at(ms: int) -> str:
    """The smallest ULID of millisecond `ms`: a bound for time ranges over ids."""
    return str(ULID.from_bytes(max(ms, 0).to_bytes(6, "big") + bytes(10)))


def ulid_floor(after: datetime) -> str:
    """The smallest ULID created strictly after `after`."""
    return ulid_at(to_ms(after) + 1)


def _check_cursor(cursor: str | None) -> None:
    if cursor is None:
        return
    try:
        ULID.from_str(cursor)
    except ValueError as exc:
        raise InvalidInput("cursor: not a cursor this API returned") from exc


class InboxService:
    def __init__(self, store: InboxStore, durable: DurableInbox | None = None) -> None:
        self._store = store
        self._durable = durable
        """Durable inbox mode's log, if on: changes are appended to it."""

    def _changed(self, me: UserPrincipal, op: LoggedOp) -> None:
        if self._durable is not None:
            self._durable.changed(me.tenant, me.user, op)

    async def list(self, me: UserPrincipal, request: ListRequest) -> InboxPage:
        _check_cursor(request.cursor)
        after, before = request.created_after, request.created_before
        query = PageQuery(
            status=request.status,
            category=request.category,
            limit=request.limit,
            cursor=request.cursor,
            since_id=ulid_floor(request.since) if request.since is not None else None,
            pinned_only=request.pinned,
            tags_any=request.tags_any,
            tags_all=request.tags_all,
            severity_at_least=request.severity_at_least,
            actor=request.actor,
            after_id=ulid_floor(after) if after is not None else None,
            before_id=ulid_at(to_ms(before)) if before is not None else None,
        )
        return await self._store.page(me.tenant, me.user, query)

    async def counts(self, me: UserPrincipal) -> Counts:
        counts, _seq = await self._store.counts(me.tenant, me.user)
        return counts

    async def get(self, me: UserPrincipal, notification_id: str) -> InboxItem:
        item = await self._store.get(me.tenant, me.user, notification_id)
        if item is None:
            raise NotFound(f"no notification {notification_id}")
        return item

    async def mark(self, me: UserPrincipal, notification_id: str, change: StateChange) -> InboxItem:
        """Apply one PATCH atomically: all of it, or (a pin over the limit) none of it."""
        read, seen, archived, pinned = change.read, change.seen, change.archived, change.pinned
        result = await self._store.mark(
            me.tenant,
            me.user,
            [notification_id],
            read=read,
            seen=seen,
            archived=archived,
            pinned=pinned,
        )
        if result.codes == [0]:
            raise NotFound(f"no notification {notification_id}")
        if result.codes == [3]:
            limit = self._store.limits.pinned_per_user
            raise LimitReached(
                f"pinned: you already have {limit} pinned notifications, the most allowed; "
                f"unpin one first",
                limit=limit,
            )
        op = MarkOp(ids=[notification_id], read=read, seen=seen, archived=archived, pinned=pinned)
        self._changed(me, op)
        return await self.get(me, notification_id)

    async def delete(self, me: UserPrincipal, notification_id: str) -> None:
        if not await self._store.remove(me.tenant, me.user, [notification_id]):
            raise NotFound(f"no notification {notification_id}")
        self._changed(me, RemoveOp(ids=[notification_id]))

    async def read_all(
        self,
        me: UserPrincipal,
        *,
        category: str | None,
        before: datetime | None,
        action: Literal["read", "archive"] = "read",
    ) -> int:
        """Mark every unread item read, or archive every item (`action`), optionally only
        a category or older ones; returns how many changed."""
        before_id = ulid_at(to_ms(before)) if before is not None else None
        updated = await self._store.mark_all(
            me.tenant, me.user, category=category, before_id=before_id, action=action
        )
        # Replayed later, "everything" must still mean everything up to now.
        bound = before_id or ulid_at(to_ms(datetime.now(UTC)) + 1)
        self._changed(me, MarkAllOp(category=category, before_id=bound, action=action))
        return updated

    async def bulk(
        self,
        me: UserPrincipal,
        ids: Sequence[str],
        *,
        read: bool | None,
        seen: bool,
        delete: bool,
        archived: bool | None = None,
    ) -> int:
        if delete:
            removed = await self._store.remove(me.tenant, me.user, ids)
            self._changed(me, RemoveOp(ids=list(ids)))
            return removed
        result = await self._store.mark(
            me.tenant, me.user, ids, read=read, seen=seen, archived=archived
        )
        self._changed(me, MarkOp(ids=list(ids), read=read, seen=seen, archived=archived))
        return sum(1 for code in result.codes if code == 2)
