"""Changing placed copies: marks, actions, removals, recalls, purges, views, preferences."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Literal

from notifyhub import deadline as request_deadline
from notifyhub.store.codecs import (
    ActArgs,
    Acted,
    Dropped,
    LogMaxArgs,
    MarkAllArgs,
    MarkArgs,
    Marked,
    MarkedAll,
    RemoveArgs,
    ResurfaceArgs,
    Synced,
    ViewsArgs,
)
from notifyhub.store.inbox.base import InboxBase
from notifyhub.store.keys import member
from notifyhub.store.scripts import pipelined, queue_script


class Changing(InboxBase):
    """A user's changes to their copies, and the doorbell each rings."""

    async def sync_views(self, tenant: str, user: str, args: ViewsArgs) -> Synced:
        """Give the user these view definitions (unless they follow newer ones) and
        recount their views (lua/views.lua); streams get the counts as a `views` change."""
        synced = Synced.from_reply(
            await self._call(self.scripts.views, tenant, user, args.to_args())
        )
        await self._publish([(member(tenant, user), synced.seq)])
        return synced

    async def mark(
        self,
        tenant: str,
        user: str,
        ids: Sequence[str],
        *,
        read: bool | None,
        seen: bool,
        archived: bool | None = None,
        pinned: bool | None = None,
        snooze_until_ms: int | None = None,
    ) -> Marked:
        """Per id: 0 missing, 1 unchanged, 2 changed, 3 refused: pinning it would pass
        `limits.pinned_per_user` (`Marked.codes`)."""
        args = MarkArgs(
            self._limits.change_log_max,
            read=read,
            seen=seen,
            ids=ids,
            archived=archived,
            pinned=pinned,
            pin_max=self._limits.pinned_per_user,
            snooze_until_ms=snooze_until_ms,
        )
        marked = Marked.from_reply(
            await self._call(self.scripts.mark, tenant, user, args.to_args())
        )
        await self._publish([(member(tenant, user), marked.seq)])
        return marked

    async def resurface(self, tenant: str, user: str, notification_id: str, until_ms: int) -> int:
        """A snooze until `until_ms` ended: the copy is unread again, in the lists and the
        counts (a `notification` change with `resurfaced`). Returns its seq; 0 when the
        copy is gone or snoozed otherwise since (a later snooze, or unsnoozed)."""
        args = ResurfaceArgs(self._limits.change_log_max, notification_id, until_ms)
        raw = await self._call(self.scripts.resurface, tenant, user, args.to_args())
        seq = int(raw[0])
        await self._publish([(member(tenant, user), seq)])
        return seq

    async def act(
        self,
        tenant: str,
        user: str,
        notification_id: str,
        index: int,
        action: str,
        *,
        at_ms: int | None = None,
        activity: str = "",
    ) -> Acted:
        """Complete the `index`-th action (from 1; its id `action`) of the user's copy,
        once (lua/act.lua): `Acted.code` 2 now, 1 already (`Acted.done` the first), 0 the
        copy is missing, 3 a thread no longer shows `activity`."""
        limit = self._limits.change_log_max
        args = ActArgs(limit, notification_id, index, action, at_ms, activity)
        acted = Acted.from_reply(await self._call(self.scripts.act, tenant, user, args.to_args()))
        if acted.seq:
            await self._publish([(member(tenant, user), acted.seq)])
        return acted

    async def mark_all(
        self,
        tenant: str,
        user: str,
        *,
        category: str | None,
        before_id: str | None,
        action: Literal["read", "archive"] = "read",
        view: str | None = None,
        view_line: str | None = None,
    ) -> MarkedAll:
        """Mark every unread item read, or archive every item (`action`), optionally only
        those in one of the user's views (`view`, by name: what its list shows) or that a
        view definition holds (`view_line`, a replay); says how many changed and the named
        view's definition line ('' when the user has no such view: nothing changed)."""
        limit = self._limits.change_log_max
        args = MarkAllArgs(limit, category, before_id, action, view, view_line)
        raw = await self._call(self.scripts.mark_all, tenant, user, args.to_args())
        marked = MarkedAll.from_reply(raw)
        await self._publish([(member(tenant, user), marked.seq)])
        return marked

    async def remove(self, tenant: str, user: str, ids: Sequence[str]) -> int:
        args = RemoveArgs(self._limits.change_log_max, ids=ids)
        removed = Dropped.from_reply(
            await self._call(self.scripts.remove, tenant, user, args.to_args())
        )
        await self._publish([(member(tenant, user), removed.seq)])
        return removed.dropped

    async def recall(self, tenant: str, user: str, notification_id: str) -> int:
        """Take a recalled notification out of the user's inbox (lua/recall.lua): its own
        item, or its activity out of a thread (which then shows the one before, or goes
        with its last); returns 1 when something changed, else 0."""
        args = RemoveArgs(self._limits.change_log_max, ids=[notification_id])
        recalled = Dropped.from_reply(
            await self._call(self.scripts.recall, tenant, user, args.to_args())
        )
        await self._publish([(member(tenant, user), recalled.seq)])
        return recalled.dropped

    async def recall_many(self, tenant: str, users: Sequence[str], notification_id: str) -> int:
        """`recall` from many users of one tenant: `limits.fanout_batch` of them per
        pipelined round trip, then their doorbells in one more, each batch renewing the
        request's deadline (a recall from a big fan-out's inboxes is working, not stuck on
        Redis: a round trip or two per user took a 25,000-user one past it). Returns how
        many inboxes changed."""
        script = self.scripts.recall
        raw = RemoveArgs(self._limits.change_log_max, ids=[notification_id]).to_args()
        batch, removed = self._limits.fanout_batch, 0
        for start in range(0, len(users), batch):
            part = users[start : start + batch]

            def build(pipe: Any, part: Sequence[str] = part) -> None:
                for user in part:
                    queue_script(pipe, script, self._keys.inbox_list(tenant, user), raw)

            replies = await pipelined(self._bulk, build, self.scripts.all)
            recalled = [Dropped.from_reply(reply) for reply in replies]
            changed = [
                (member(tenant, user), done.seq)
                for user, done in zip(part, recalled, strict=True)
                if done.seq
            ]
            if changed:
                await pipelined(self._bulk, partial(self.doorbells.queue, changed=changed), [])
            removed += sum(done.dropped for done in recalled)
            request_deadline.renew()
        return removed

    async def purge(self, tenant: str, user: str) -> tuple[int, int | None]:
        """Drop the user's expired items; returns (purged, next expiry ms or None)."""
        args = LogMaxArgs(self._limits.change_log_max).to_args()
        purged = Dropped.from_reply(await self._call(self.scripts.purge, tenant, user, args))
        if purged.dropped:
            await self._publish([(member(tenant, user), purged.seq)])
        return purged.dropped, purged.next_expiry_ms

    async def sync_views_many(self, tenant: str, users: Sequence[str], args: ViewsArgs) -> None:
        """`sync_views` for many users of one tenant in one pipelined round trip."""
        script, inbox_list, raw = self.scripts.views, self._keys.inbox_list, args.to_args()

        def build(pipe: Any) -> None:
            for user in users:
                queue_script(pipe, script, inbox_list(tenant, user), raw)

        replies = await pipelined(self._bulk, build, self.scripts.all)
        synced = [Synced.from_reply(reply).seq for reply in replies]
        await self._publish(
            [(member(tenant, u), seq) for u, seq in zip(users, synced, strict=True)]
        )

    async def set_preferences(self, tenant: str, user: str, flags: dict[str, str]) -> None:
        """Replace the user's cached preferences (category -> "<inbox><push>" as 0/1)."""
        key = self._keys.inbox(tenant, user).prefs
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            if flags:
                pipe.hset(key, mapping=dict(flags))  # type: ignore[arg-type]
            await pipe.execute()

    async def forget(self, notification_id: str) -> None:
        """Drop the recipient index of a recalled notification."""
        await self._redis.delete(self._keys.recipients(notification_id))

    async def _publish(self, changed: list[tuple[str, int]]) -> None:
        changed = [(m, s) for m, s in changed if s]
        if not changed:
            return
        publish = self._redis.spublish if self.doorbells.sharded else self._redis.publish
        for channel, payload in self.doorbells.messages(changed):
            await publish(channel, payload)
