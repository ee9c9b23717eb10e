"""A user's own inbox: list, poll, count, mark and delete. The user comes from the token;
in durable inbox mode each change is logged as its `LoggedOp` (store/operations.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, NoReturn

from ulid import ULID

from notifyhub.domain.auth import UserPrincipal
from notifyhub.domain.notification import (
    ActivityPage,
    Counts,
    InboxItem,
    InboxPage,
    Notification,
    Severity,
    to_ms,
)
from notifyhub.errors import InvalidInput, LimitReached, NotFound
from notifyhub.outages import outage_of
from notifyhub.services.durable import DurableInbox
from notifyhub.services.snooze import MAX_SNOOZE_S, Snoozes, WakeUp
from notifyhub.services.views import Views
from notifyhub.store.codecs import UNSNOOZE
from notifyhub.store.inbox import PIN_CURSOR, InboxStore, ListStatus, PageQuery
from notifyhub.store.operations import LoggedOp, MarkAllOp, MarkOp, RemoveOp, ResurfaceOp

log = logging.getLogger(__name__)

NOTIFICATION_FIELDS = set(Notification.model_fields)


@dataclass(frozen=True, slots=True)
class ListRequest:
    status: ListStatus = "all"
    category: str | None = None
    limit: int = 20
    cursor: str | None = None
    since: datetime | None = None
    pinned: bool | None = None
    """True: only pinned; False: only unpinned; None: pinned first."""
    tags_any: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    severity_at_least: Severity | None = None
    actor: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    view: str | None = None
    """Only the notifications in this view (the tenant's or the user's own)."""


@dataclass(frozen=True, slots=True)
class StateChange:
    """What one PATCH changes (None: unchanged)."""

    read: bool | None = None
    seen: bool = False
    archived: bool | None = None
    pinned: bool | None = None
    snooze_until_ms: int | None = None
    """Snooze until then (ms since the epoch; refused unless in the future)."""
    unsnooze: bool = False
    """End its snooze (`"snoozed_until": null`; the store is told `UNSNOOZE`)."""


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
        ULID.from_str(cursor.removeprefix(PIN_CURSOR))
    except ValueError as exc:
        raise InvalidInput("cursor: not a cursor this API returned") from exc


class InboxService:
    def __init__(
        self,
        store: InboxStore,
        durable: DurableInbox | None = None,
        snoozes: Snoozes | None = None,
        views: Views | None = None,
    ) -> None:
        self._store = store
        self._views = views
        """The user's views (None: none, counts without views' syncing)."""
        self._durable = durable
        """Durable inbox mode's log, if on: changes are appended to it."""
        self._snoozes = snoozes
        """Where snooze wake-ups are scheduled (None: snoozing is refused)."""

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
            pinned=request.pinned,
            tags_any=request.tags_any,
            tags_all=request.tags_all,
            severity_at_least=request.severity_at_least,
            actor=request.actor,
            after_id=ulid_floor(after) if after is not None else None,
            before_id=ulid_at(to_ms(before)) if before is not None else None,
            view=request.view,
        )
        if request.view is not None:
            await self._check_view(me, request.view)
        return await self._store.page(me.tenant, me.user, query)

    async def _check_view(self, me: UserPrincipal, name: str) -> None:
        """A view the user has, their copy of the views synced first."""
        counts = await self.counts(me)
        if name not in counts.views:
            known = ", ".join(sorted(counts.views)) or "none"
            raise InvalidInput(f"view: you have no view {name!r} (yours: {known})")

    async def counts(self, me: UserPrincipal) -> Counts:
        """The user's counts and every view's (`Views.position`)."""
        if self._views is not None:
            return await self._views.counts(me)
        counts, _seq = await self._store.counts(me.tenant, me.user)
        return counts

    async def get(self, me: UserPrincipal, notification_id: str) -> InboxItem:
        item = await self._store.get(me.tenant, me.user, notification_id)
        if item is None:
            raise NotFound(f"no notification {notification_id}")
        return item

    async def activities(
        self, me: UserPrincipal, notification_id: str, *, cursor: str | None, limit: int
    ) -> ActivityPage:
        """A thread's activities, the latest first, `limit` per page after `cursor` (the
        last id of the previous page); a single notification's one."""
        found = await self._store.activities(me.tenant, me.user, notification_id)
        if found is None:
            raise NotFound(f"no notification {notification_id}")
        if not found:  # no thread: the notification itself
            item = await self.get(me, notification_id)
            found = [Notification.model_validate(item.model_dump(include=NOTIFICATION_FIELDS))]
        newest = found[::-1]
        if cursor is not None:
            ids = [activity.id for activity in newest]
            if cursor not in ids:
                raise InvalidInput("cursor: not an activity of this notification")
            newest = newest[ids.index(cursor) + 1 :]
        page = newest[:limit]
        more = len(newest) > limit
        return ActivityPage(items=page, next_cursor=page[-1].id if more else None)

    async def mark(self, me: UserPrincipal, notification_id: str, change: StateChange) -> InboxItem:
        """Apply one PATCH atomically: all of it, or (a pin over the limit) none of it. A
        snooze's wake-up is durable in PostgreSQL before the copy is snoozed, and only for
        a copy the user has; once the change is made the copy's other wake-ups go (a
        re-snooze, an unsnooze), and a refused change takes its own back (services/
        snooze.py)."""
        read, seen, archived, pinned = change.read, change.seen, change.archived, change.pinned
        snooze, wake_up = change.snooze_until_ms, None
        if snooze is not None:
            self._check_snooze(snooze)
            await self.get(me, notification_id)  # a 404 schedules no wake-up
            wake_up = await self._schedule_wake_up(me, notification_id, snooze)
        elif change.unsnooze:
            snooze = UNSNOOZE
        result = await self._store.mark(
            me.tenant,
            me.user,
            [notification_id],
            read=read,
            seen=seen,
            archived=archived,
            pinned=pinned,
            snooze_until_ms=snooze,
        )
        if result.codes in ([0], [3]):
            if wake_up is not None:  # a refused change leaves nothing behind
                await self._snoozes_().unschedule(me.tenant, wake_up)
            self._refuse(notification_id, result.codes[0])
        if wake_up is not None or change.unsnooze:  # the copy's other wake-ups are moot
            await self._forget_wake_ups(me, [notification_id], keep=wake_up)
        op = MarkOp(
            ids=[notification_id],
            read=read,
            seen=seen,
            archived=archived,
            pinned=pinned,
            snooze_until_ms=snooze,
        )
        self._changed(me, op)
        return await self.get(me, notification_id)

    def _refuse(self, notification_id: str, code: int) -> NoReturn:
        """The problem of a PATCH the store refused (`Marked.codes`: 0 missing, 3 a pin
        past the limit)."""
        if code == 0:
            raise NotFound(f"no notification {notification_id}")
        limit = self._store.limits.pinned_per_user
        raise LimitReached(
            f"pinned: you already have {limit} pinned notifications, the most allowed "
            f"(archived and snoozed ones count: ?pinned=true&status=archived lists the "
            f"archived); unpin one first",
            limit=limit,
        )

    def _snoozes_(self) -> Snoozes:
        assert self._snoozes is not None  # (a wake-up was scheduled: _check_snooze)
        return self._snoozes

    async def _forget_wake_ups(
        self, me: UserPrincipal, ids: Sequence[str], *, keep: str | None = None
    ) -> None:
        """Remove the wake-ups of the user's copies `ids` but `keep`: their snooze
        changed, ended, or went with the copy (each would stay a row for good). Best
        effort when PostgreSQL is out: a wake-up left behind does nothing at its time."""
        if self._snoozes is None:
            return
        try:
            await self._snoozes.forget(me.tenant, me.user, ids, keep=keep)
        except Exception as exc:
            if outage_of(exc) is None:
                raise
            log.warning("snooze wake-ups of %s not removed: %s", me.user, exc)

    def _check_snooze(self, until_ms: int) -> None:
        """A snooze's end this hub can wake it at (422s)."""
        now_ms = to_ms(datetime.now(UTC))
        if until_ms <= now_ms:
            raise InvalidInput("snoozed_until: must be in the future")
        if until_ms - now_ms > MAX_SNOOZE_S * 1000:
            raise InvalidInput(f"snoozed_until: at most {MAX_SNOOZE_S // 86400} days ahead")
        if self._snoozes is None:
            raise InvalidInput("snooze: this hub has no delayed queue to wake snoozes up")

    async def _schedule_wake_up(
        self, me: UserPrincipal, notification_id: str, until_ms: int
    ) -> str:
        wake_up = WakeUp(me.user, notification_id, until_ms)
        return await self._snoozes_().schedule(me.tenant, wake_up)

    async def resurface(self, tenant: str, user: str, notification_id: str, until_ms: int) -> bool:
        """A snooze's wake-up fell due (workers/delayed.py): the copy is back, unread.
        False when there was nothing to do (gone, or snoozed otherwise since)."""
        seq = await self._store.resurface(tenant, user, notification_id, until_ms)
        if seq and self._durable is not None:
            self._durable.changed(tenant, user, ResurfaceOp(id=notification_id, until_ms=until_ms))
        return bool(seq)

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
        view: str | None = None,
    ) -> int:
        """Mark every unread item read, or archive every item (`action`), optionally only
        a category, older ones, or those in one of the user's views (what `?view=` lists:
        a view the user does not have is refused, as there); returns how many changed."""
        if view is not None:
            await self._check_view(me, view)
        before_id = ulid_at(to_ms(before)) if before is not None else None
        marked = await self._store.mark_all(
            me.tenant, me.user, category=category, before_id=before_id, action=action, view=view
        )
        if view is not None and not marked.view_line:  # deleted since the check: none marked
            raise InvalidInput(f"view: you have no view {view!r}")
        # Replayed later, "everything" must still mean everything up to now, and a view
        # what it was now.
        bound = before_id or ulid_at(to_ms(datetime.now(UTC)) + 1)
        line = marked.view_line or None
        op = MarkAllOp(category=category, before_id=bound, action=action, view_line=line)
        self._changed(me, op)
        return marked.updated

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
