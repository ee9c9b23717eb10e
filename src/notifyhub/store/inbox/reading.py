"""Reading users' inboxes: pages, single items, counts, threads' activities, changes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from notifyhub.domain.notification import (
    SEVERITY_RANK,
    Counts,
    InboxItem,
    InboxPage,
    Notification,
    Severity,
    ViewCount,
)
from notifyhub.store.changes import Changes
from notifyhub.store.codecs import (
    ChangesArgs,
    Counted,
    Found,
    GetArgs,
    LogMaxArgs,
    PageArgs,
    Paged,
    changes_from_reply,
)
from notifyhub.store.inbox.base import InboxBase, UserRef
from notifyhub.store.items import parse_item
from notifyhub.store.scripts import pipelined, queue_script

ListStatus = Literal["all", "unread", "read", "archived", "snoozed"]


PIN_CURSOR = "pin."
"""How a cursor of a page that ended among the pinned items starts (page.lua)."""


@dataclass(frozen=True, slots=True)
class PageQuery:
    status: ListStatus = "all"
    category: str | None = None
    limit: int = 20
    cursor: str | None = None
    since_id: str | None = None
    """Oldest-first listing of ids >= this ULID bound (the `since=` poll)."""
    pinned: bool | None = None
    """True: only pinned items; False: only unpinned ones; None: in the newest-first
    list the pinned items lead, counted in `limit` (a page that ends among them has a
    `pin.` cursor), and the pages after them leave them out."""
    tags_any: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    severity_at_least: Severity | None = None
    actor: str | None = None
    after_id: str | None = None
    """Only ids above this ULID bound (created after), exclusive."""
    before_id: str | None = None
    """Only ids below this ULID bound (created before), exclusive."""
    view: str | None = None
    """Only the copies in this view of the user's (as synced: lua/views.lua)."""


@dataclass(frozen=True, slots=True)
class ChangeRead:
    """One stream's question: what changed for (tenant, user) after `after_seq`?"""

    tenant: str
    user: str
    after_seq: int
    max_entries: int


@dataclass(frozen=True, slots=True)
class Position:
    """A user's counts, the seq they are as of, and that seq's epoch; the versions of the
    tenant's and their own views their view counts follow (-1: never synced)."""

    counts: Counts
    seq: int
    epoch: str
    tenant_views: int = -1
    personal_views: int = -1


class Reading(InboxBase):
    """The reads of an inbox (get, counts, page, activities, changes scripts) and of the
    notification indexes."""

    async def get(self, tenant: str, user: str, notification_id: str) -> InboxItem | None:
        args = GetArgs(self._limits.change_log_max, notification_id)
        found = Found.from_reply(await self._call(self.scripts.get, tenant, user, args.to_args()))
        return parse_item(found.content, found.state) if found else None

    async def counts(self, tenant: str, user: str) -> tuple[Counts, int]:
        """The user's counts and the seq they are as of."""
        position = await self.position(tenant, user)
        return position.counts, position.seq

    async def position(self, tenant: str, user: str) -> Position:
        """The user's counts, the seq they are as of and its epoch (a stream's start)."""
        args = LogMaxArgs(self._limits.change_log_max).to_args()
        c = Counted.from_reply(await self._call(self.scripts.counts, tenant, user, args))
        views = {
            name: ViewCount(unread=unread, unseen=unseen, total=total)
            for name, (unread, unseen, total) in (c.views or {}).items()
        }
        counts = Counts(unread=c.unread, unseen=c.unseen, total=c.total, views=views)
        return Position(counts, c.seq, c.epoch, c.tenant_views, c.personal_views)

    async def page(self, tenant: str, user: str, query: PageQuery) -> InboxPage:
        pin_after = ""
        if query.cursor is not None and query.cursor.startswith(PIN_CURSOR):
            pin_after = query.cursor.removeprefix(PIN_CURSOR)
            query = replace(query, cursor=None)  # the pins' page: the others from the top
        order, bound, stop = _page_bounds(query)
        pinned = _pin_mode(query, order)
        severity = query.severity_at_least
        args = PageArgs(
            log_max=self._limits.change_log_max,
            order=order,
            bound=bound,
            limit=query.limit,
            status=query.status,
            category=query.category,
            budget=self._limits.list_scan_budget,
            stop=stop,
            pinned=pinned,
            tags_any=query.tags_any,
            tags_all=query.tags_all,
            severity_min=SEVERITY_RANK[severity] if severity else 0,
            actor=query.actor,
            view=query.view,
            pin_after=pin_after,
        )
        paged = Paged.from_reply(await self._call(self.scripts.page, tenant, user, args.to_args()))
        items = [parse_item(content, state) for _id, content, state in paged.rows]
        return InboxPage(items=items, next_cursor=paged.next_cursor, unread=paged.unread)

    async def activities(
        self, tenant: str, user: str, notification_id: str
    ) -> list[Notification] | None:
        """A thread's kept activities, oldest first (lua/activities.lua); [] when the
        item is no thread, None when the user has no such item."""
        args = [*LogMaxArgs(self._limits.change_log_max).to_args(), notification_id]
        raw = await self._call(self.scripts.activities, tenant, user, args)
        if raw is None:
            return None
        return [Notification.model_validate_json(content) for content in raw]

    async def changes(self, tenant: str, user: str, after_seq: int, max_entries: int) -> Changes:
        """The changes after `after_seq`: at most `max_entries`, and no more than about
        `limits.stream_read_bytes` (at least one), so the caller reads again while the
        last entry's seq is below `Changes.seq`."""
        args = ChangesArgs(after_seq, max_entries, self._limits.stream_read_bytes)
        return changes_from_reply(
            await self._call(self.scripts.changes, tenant, user, args.to_args())
        )

    async def changes_many(self, reads: Sequence[ChangeRead]) -> list[Changes]:
        """`changes` for many users in one pipelined round trip (one script per user, so
        each stays in its user's Cluster slot). Each read's byte budget bounds the reply:
        without it, streams that fell behind asked for so much in one pipeline that it
        outlived its timeout and ended every stream in it (docs/ARCHITECTURE.md)."""
        changes, inbox_list = self.scripts.changes, self._keys.inbox_list
        max_bytes = self._limits.stream_read_bytes

        def build(pipe: Any) -> None:
            for read in reads:
                args = ChangesArgs(read.after_seq, read.max_entries, max_bytes)
                queue_script(pipe, changes, inbox_list(read.tenant, read.user), args.to_args())

        results = await pipelined(self._bulk, build, self.scripts.all)
        return [changes_from_reply(raw) for raw in results]

    async def users_of(self, tenant: str) -> AsyncIterator[str]:
        """The users of `tenant` holding notifications (the expiry index names every
        inbox with an item); a user may come twice."""
        pattern = _glob_escape(f"{tenant}/") + "*"
        async for raw, _score in self._redis.zscan_iter(
            self._keys.expiry, match=pattern, count=500
        ):
            yield raw.decode().partition("/")[2]

    async def recipients(self, notification_id: str) -> list[UserRef]:
        """Every user holding a copy of this notification (for recall)."""
        found: list[UserRef] = []
        async for raw in self._redis.sscan_iter(self._keys.recipients(notification_id), count=1000):
            tenant, _, user = raw.decode().partition("/")
            found.append((tenant, user))
        return found


def _glob_escape(text: str) -> str:
    """`text` matched literally by a SCAN pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _pin_mode(
    query: PageQuery, order: Literal["asc", "desc"]
) -> Literal["first", "skip", "only", "none", ""]:
    """Where page.lua puts pinned items: only them, none of them, first in the
    newest-first list (its pages past them: left out), or in time order."""
    if query.pinned is not None:
        return "only" if query.pinned else "none"
    if order == "desc" and query.status not in ("archived", "snoozed"):
        return "skip" if query.cursor else "first"
    return ""


def _page_bounds(query: PageQuery) -> tuple[Literal["asc", "desc"], str, str]:
    """The scan's order, start and stop (ZRANGEBYLEX forms), the created-at range
    included (ids are ULIDs: their order is their creation order)."""
    after, before, cursor = query.after_id, query.before_id, query.cursor
    if query.since_id is not None:
        low = max(cursor or query.since_id, after or "")
        # `since` is inclusive; a cursor is passed with every member it starts (a moved
        # copy's sort key: lua/common.lua)
        past = "~" if low == cursor else ""
        start = f"({low}{past}" if low in (cursor, after) else f"[{low}"
        return "asc", start, f"({before}" if before else "+"
    high = min(x for x in (cursor, before) if x) if cursor or before else None
    return "desc", f"({high}" if high else "+", f"({after}" if after else "-"
