"""Placing a notification's copies in its recipients' inboxes: the write path of a publish."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.crc import key_slot

from notifyhub.domain.notification import SEVERITY_RANK, Notification, Severity
from notifyhub.domain.views import ViewSet
from notifyhub.settings import Limits
from notifyhub.store.coalesce import Coalescer
from notifyhub.store.codecs import (
    Args,
    CopyArgs,
    Deferred,
    PerUser,
    Placed,
    PlaceTail,
    PushedOut,
    ThreadArgs,
)
from notifyhub.store.doorbells import INLINE_MARK, SHARED_LINES, traced
from notifyhub.store.fanouts import FanoutStep
from notifyhub.store.inbox.base import InboxBase, UserRef, keys_of, slot_users, user_members
from notifyhub.store.inbox.copies import copy_content, fresh_item, is_inlinable
from notifyhub.store.keys import INBOX_FIELDS, Keys
from notifyhub.store.scripts import pipelined, pipelined_each, queue_script, slot_node
from notifyhub.turns import sliced

PENDING_PLACE_AT = 16
"""A deferred fan-out places the inboxes holding more pending copies than this."""

INLINE_MIN_USERS = 64
"""Placements for this many users or more ring with their copies' events (a second round
trip for the writer, no log read for each recipient's stream); smaller ones ring in
their writes' own pipeline."""

SHARED_MAX_USERS = 32
"""Placements for at most this many users (a publish to a few users: the common case)
made in one event-loop tick share one pipeline (`Placing._shared`)."""
SHARED_MAX_PLACEMENTS = 8
"""Placements per shared pipeline (more in one tick take several, sent at once). Not all
of a tick's in one, which makes the hub wait out Redis' whole batch idle and then answer
every connection at once: the replies of the first pipeline come back while Redis runs
the rest, and the hub answers those meanwhile (docs/scaling.md, "Design notes")."""


@dataclass(frozen=True, slots=True)
class Placement:
    """What `InboxStore.placement` did, per user in the callers' order."""

    seqs: list[int]
    """The copy's seq (0: the user had it; -1: their preferences drop it); a deferred
    placement's pending count."""
    dropped: list[int]
    """How many oldest notifications the user's full inbox dropped for the copy (their
    `delete` changes follow the copy's seq in the log); 0 for a deferred placement."""
    pushed_out: dict[int, PushedOut] = field(default_factory=dict)
    """What copies replaced or evicted, by the user's position (none for a deferred
    placement: a pending copy pushes out when it is placed)."""


class Placing(InboxBase):
    """Placing copies (place.lua, defer.lua, place_pending.lua): one round trip per
    placement, small ones of a tick sharing a pipeline, and the doorbells after."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        limits: Limits,
        *,
        on_evicted: Callable[[int], object] | None = None,
        bulk: Redis | None = None,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 100,
    ) -> None:
        super().__init__(redis, keys, limits, bulk=bulk)
        self._on_evicted = on_evicted or (lambda evicted: None)
        """Told how many oldest notifications full inboxes dropped (a metric)."""
        self._wait = (wait_replicas, wait_timeout_ms)
        """WAIT for this many replicas (bounded) before a write of copies is acknowledged; 0: no."""
        self._shared: Coalescer[Callable[[Any], None], list[Any]] = Coalescer(
            self._run_shared, max_batch=SHARED_MAX_PLACEMENTS
        )
        """Small placements of one tick, one pipeline: not a pipeline, a socket write and
        a read for every publish to one user."""

    async def place(
        self,
        notification: Notification,
        users: Sequence[UserRef],
        *,
        pull: bool = False,
        defer: bool = False,
        trace: bytes | None = None,
        views: ViewSet | None = None,
        arrived_ms: int = 0,
    ) -> list[int]:
        """`placement`'s seqs."""
        placed = await self.placement(
            notification,
            users,
            pull=pull,
            defer=defer,
            trace=trace,
            views=views,
            arrived_ms=arrived_ms,
        )
        return placed.seqs

    async def placement(
        self,
        notification: Notification,
        users: Sequence[UserRef],
        *,
        pull: bool = False,
        defer: bool = False,
        trace: bytes | None = None,
        views: ViewSet | None = None,
        step: FanoutStep | None = None,
        arrived_ms: int = 0,
    ) -> Placement:
        """Store one copy per user (skipping users who have it) and ring their doorbells.

        One round trip: the recipient index is written before the copies (so a recall
        finds every user a crash may have reached), with the expiry index, then the copies
        and one doorbell message for the batch; on one Redis the place script writes both
        indexes itself (`_place_tail`). An inlinable notification's doorbell carries the
        copies' events, so caught-up streams send them without reading the log: on one
        Redis the place script publishes it, on a Cluster a second round trip does (for
        INLINE_MIN_USERS users or more; smaller ones ring in the writes'). Returns the new
        seq per user, 0 where the user already had this id, -1 where the user's
        preferences drop its category (`Placement.seqs`). `pull` copies are stored
        without a live `notification` event (counts still update). An inbox past
        `limits.items_per_user` drops its oldest notifications (delete changes; how many
        in `Placement.dropped`).

        `defer` (big fan-outs) leaves each copy pending instead: one list push per user,
        which the next script touching that inbox (a read, a stream's read, a change)
        makes a copy first, so nobody can tell it from an immediate one but the writer is
        several times faster. Returns the user's pending count in place of a seq then
        (lists longer than PENDING_PLACE_AT are placed right away, bounding them). The
        caller has written the recipient index first (`announce_deferred`), and rings the
        batch's users once it is written (`ring_deferred`; services/fanouts.py).

        `trace` (a traceparent, when tracing is on) rides in the doorbell
        (store/doorbells.py `traced`). `views` (the tenant's, as the caller knows them):
        which of them the notification is in is worked out here once, instead of per user
        in the script (users whose copy of the views has another version evaluate them).

        `step` (`defer`, on one Redis): the batch of a fan-out placed after its 202, which
        moves its placement record on in the same script (store/fanouts.py); a
        `ResponseError` that `fanouts.lost` recognises when the record is no longer its
        writer's (nothing written then).

        `arrived_ms`: a scheduled notification's delivery (its id was made at its
        acceptance, earlier): its copies sort by it in lists, cursors and `since` polls, as
        a copy back from a snooze sorts by its return (`CopyArgs.arrived_ms`); 0: by the id.
        """
        if not users:
            return Placement([], [])
        content, thread = copy_content(notification)
        expires_ms = int(notification.expires_at.timestamp() * 1000)
        members = user_members(users)
        # The doorbell carries the copies' events when every copy is a fresh one (inlinable).
        n = notification
        inlinable = is_inlinable(n, pull=pull) and not defer
        rings_inline = inlinable and self._cluster and len(users) >= INLINE_MIN_USERS
        tail = self._place_tail(content, members, trace, inlinable=inlinable, defer=defer)
        copy = self._copy_args(
            notification,
            content,
            expires_ms,
            pull=pull,
            views=views,
            thread=thread,
            arrived_ms=arrived_ms,
        )
        step = step if defer and not self._cluster else None
        script, args, fields = self._script_call(copy, tail, defer=defer, step=step)
        keys = self._keys.user_keys(members, fields)
        by_slot = self._slot_groups(keys, len(fields))
        recipients, expiry = self._keys.recipients(notification.id), self._keys.expiry
        indexes = [recipients, expiry] if tail is not None else []  # the script's last KEYS
        indexes += [step.record] if step is not None else []
        calls = [(slot, [*group, *indexes]) for slot, group in by_slot.items()]
        scripts_at = [0]  # where the script replies start among the pipeline's: counted

        def build(pipe: Any) -> None:
            first = len(pipe)  # a shared pipeline holds other placements' commands before
            if tail is None:  # (else the script writes them)
                self._queue_indexes(pipe, recipients, members, expires_ms, defer=defer)
            scripts_at[0] = len(pipe) - first
            for slot, call_keys in calls:  # (the Cluster client knows its nodes by now)
                queue_script(pipe, script, call_keys, args, node=slot_node(self._redis, slot))
            if not (self._cluster or inlinable or defer):  # one connection: after the writes
                self.doorbells.queue_rereads(pipe, members, traced(b"", trace))
            if self._wait[0]:
                written = [*by_slot, key_slot(recipients.encode()), key_slot(expiry.encode())]
                self._queue_wait(pipe, written)

        # With replica waits each placement keeps its own pipeline: in a shared one their
        # WAITs would run one after another, each up to its timeout when replicas fall short.
        share = len(users) <= SHARED_MAX_USERS and not self._wait[0]
        results = await self._pipelined(build, share=share)
        replies = results[scripts_at[0] : scripts_at[0] + len(by_slot)]
        reply = self._merge(Deferred if defer else Placed, keys, len(fields), replies)
        seqs, evicted = reply.firsts, reply.evicted
        if self._cluster and not defer:
            ringing = reply if rings_inline and isinstance(reply, Placed) else None
            await self._ring_after_writes(members, ringing, content, trace)
        if defer:
            evicted += await self._place_long(users, seqs)
        if evicted:
            self._on_evicted(evicted)
        pushed_out = reply.pushed_out if isinstance(reply, Placed) else {}
        return Placement(seqs, reply.dropped, pushed_out)

    async def ring_deferred(self, members: Sequence[str], trace: bytes | None = None) -> None:
        """Ring the users (`T/U`) of a batch of a deferred fan-out once it is written
        (services/fanouts.py): their streams read, making the pending copy real. The
        streams of a broadcast shown ahead of its copies (`announce_deferred`) then get its
        counts; the others, which could not take the announcement, the notification."""
        header = traced(b"", trace)

        async def rings() -> AsyncGenerator[Callable[[Any], None]]:  # a message each
            async for part in sliced(members, SHARED_LINES):
                yield partial(self.doorbells.queue_rereads, members=part, header=header)

        await pipelined_each(self._bulk, rings())

    def _place_tail(
        self,
        content: bytes,
        members: list[str],
        trace: bytes | None,
        *,
        inlinable: bool,
        defer: bool,
    ) -> PlaceTail | None:
        """place.lua's tail on one Redis: the script writes the notification's recipient
        and expiry indexes, and rings an inlinable notification's doorbell after its writes.
        None on a Cluster (the indexes and the channel live on other slots), or for
        defer.lua."""
        if self._cluster or defer:
            return None
        if not inlinable:
            return PlaceTail(members, indexed=True)
        header = traced(INLINE_MARK + fresh_item(content), trace)
        channels = self.doorbells.channels_of(members)
        return PlaceTail(members, indexed=True, channels=channels, header=header)

    def _queue_indexes(
        self, pipe: Any, recipients: str, members: list[str], expires_ms: int, *, defer: bool
    ) -> None:
        """The notification's recipient index (a recall finds every user a crash may have
        reached: it goes before the copies; a deferred fan-out's is whole before its first
        batch, `announce_deferred`) and the users' expiry index (ZADD LT: a user's earlier
        expiry stays), as commands of their own."""
        if not defer:
            pipe.sadd(recipients, *members)
            pipe.expireat(recipients, expires_ms // 1000 + 1)
        scored: list[str | int] = [expires_ms] * (2 * len(members))
        scored[1::2] = members
        pipe.execute_command("ZADD", self._keys.expiry, "LT", *scored)

    def _copy_args(
        self,
        notification: Notification,
        content: bytes,
        expires_ms: int,
        *,
        pull: bool,
        views: ViewSet | None = None,
        thread: ThreadArgs | None = None,
        arrived_ms: int = 0,
    ) -> CopyArgs:
        n = notification
        mask = views.mask(n.category, n.severity, n.tags) if views is not None else 0
        return CopyArgs(
            id=notification.id,
            content=content,
            category=notification.category or "",
            collapse_key=notification.collapse_key or "",
            expires_ms=expires_ms,
            log_max=self._limits.change_log_max,
            critical=notification.severity is Severity.CRITICAL,
            pull=pull,
            items_per_user=self._limits.items_per_user,
            severity=SEVERITY_RANK[notification.severity],
            tags=notification.tags,
            tenant_views=views.version if views is not None else None,
            tenant_mask=mask,
            thread=thread,
            arrived_ms=arrived_ms,
        )

    def _script_call(
        self, copy: CopyArgs, tail: PlaceTail | None, *, defer: bool, step: FanoutStep | None
    ) -> tuple[AsyncScript, Args, tuple[str, ...]]:
        """The script for a placement, its ARGV, and the keys it takes per user."""
        if defer:
            fields = ("pend", "prefs") if copy.category else ("pend",)
            args = copy.defer_args() + (step.args() if step is not None else [])
            return self.scripts.defer, args, fields
        return self.scripts.place, copy.place_args(tail), INBOX_FIELDS

    async def _pipelined(self, build: Callable[[Any], None], *, share: bool) -> list[Any]:
        """`pipelined` on the bulk client; `share`: in the tick's shared pipeline."""
        if share:
            return _raise_first(await self._shared(build))
        return await pipelined(self._bulk, build, self.scripts.all)

    async def _run_shared(self, builds: list[Callable[[Any], None]]) -> list[list[Any]]:
        """One pipeline for the placements of a tick (`_shared`): each gets its own
        replies, a command's error reply among them (raised to that placement alone)."""
        ends: list[int] = []

        def build(pipe: Any) -> None:
            ends.clear()  # built again after a NOSCRIPT
            for each in builds:
                each(pipe)
                ends.append(len(pipe))

        results = await pipelined(self._bulk, build, self.scripts.all, raise_on_error=False)
        return [results[start:end] for start, end in pairwise([0, *ends])]

    async def _place_long(self, users: Sequence[UserRef], pending: list[int]) -> int:
        """Place the pending copies of inboxes whose list grew past PENDING_PLACE_AT (users who
        read nothing for a while), so pending lists stay short; returns the evictions."""
        long = [users[i] for i, n in enumerate(pending) if n > PENDING_PLACE_AT]
        if not long:
            return 0
        script, inbox_list = self.scripts.place_pending, self._keys.inbox_list

        def build(pipe: Any) -> None:
            for tenant, user in long:
                queue_script(pipe, script, inbox_list(tenant, user), [])

        return sum(int(n) for n in await pipelined(self._bulk, build, self.scripts.all))

    async def _ring_after_writes(
        self,
        members: list[str],
        placed: Placed | None = None,
        content: bytes = b"",
        trace: bytes | None = None,
    ) -> None:
        """Ring once the writes are done. A Cluster pipeline runs its commands on several
        nodes at once, so a doorbell queued with the writes could reach a stream before
        the write it announces (the stream would read nothing and wait for a next one).

        With `placed` (place.lua's reply) the doorbell carries the copies'
        events (store/doorbells.py): a stream whose next change a copy is sends it
        without reading the log, which saves a broadcast's Redis a read per stream."""
        changed: list[tuple[str, int | str]] = [(m, 0) for m in members]
        header = b""
        if placed is not None:
            header = INLINE_MARK + fresh_item(content)
            for i, (seq, dropped, unread, unseen, total, epoch, views) in enumerate(
                placed.copies()
            ):
                if seq > 0 and not dropped and not views:  # else a re-read: evictions came
                    # after it, or the user's view counts are in the log
                    line = f"{seq},{unread},{unseen},{total},{epoch.decode()}"
                    changed[i] = (members[i], line)
        async with self._redis.pipeline(transaction=False) as pipe:
            self.doorbells.queue(pipe, changed, traced(header, trace))
            await pipe.execute()

    def _slot_groups(self, keys: list[str], stride: int) -> dict[int, list[str]]:
        """The KEYS of one script call per Cluster slot (`stride` keys per user, all in the
        user's slot); on standalone Redis one call (slot -1) takes them all."""
        if not self._cluster:
            return {-1: keys}
        return {
            slot: keys_of(keys, stride, users) for slot, users in slot_users(keys, stride).items()
        }

    def _merge(
        self, codec: type[PerUser], keys: list[str], stride: int, replies: list[list[Any]]
    ) -> PerUser:
        """The per-slot script replies as one, in the callers' user order."""
        if not self._cluster:
            return codec.from_reply(replies[0])
        slots = [key_slot(keys[i].encode()) for i in range(0, len(keys), stride)]
        return codec.from_slot_replies(slots, replies)

    def _queue_wait(self, pipe: Any, slots: list[int]) -> None:
        """WAIT on the connection that wrote (it waits for that connection's writes): on a
        Cluster once per master of `slots` (every slot the pipeline wrote). A shortfall
        after the timeout is accepted (a master without a live replica still takes
        writes); the reply is not checked."""
        replicas, timeout_ms = self._wait
        if not self._cluster:
            pipe.execute_command("WAIT", replicas, timeout_ms)
            return
        masters = [slot_node(self._redis, slot) for slot in slots]
        for node in {node.name: node for node in masters}.values():
            pipe.execute_command("WAIT", replicas, timeout_ms, target_nodes=node)


def _raise_first(replies: list[Any]) -> list[Any]:
    """`replies`, unless one is an error reply: then that error."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies
