"""Per-user inboxes in Redis: every change is one atomic Lua call per user (or batch)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any, Literal

import orjson
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.crc import key_slot

from notifyhub.domain.notification import (
    DEFAULT_THREAD_WINDOW_S,
    SEVERITY_RANK,
    Counts,
    InboxItem,
    InboxPage,
    Notification,
    Severity,
    ViewCount,
)
from notifyhub.domain.views import ViewSet
from notifyhub.settings import Limits
from notifyhub.store.changes import Changes
from notifyhub.store.client import is_cluster
from notifyhub.store.coalesce import Coalescer
from notifyhub.store.codecs import (
    ActArgs,
    Acted,
    Args,
    ChangesArgs,
    CopyArgs,
    Counted,
    Deferred,
    Dropped,
    Found,
    GetArgs,
    LogMaxArgs,
    MarkAllArgs,
    MarkArgs,
    Marked,
    MarkedAll,
    PageArgs,
    Paged,
    PerUser,
    Placed,
    PlaceTail,
    PushedOut,
    RemoveArgs,
    ResurfaceArgs,
    Synced,
    ThreadArgs,
    ViewsArgs,
    changes_from_reply,
)
from notifyhub.store.doorbells import ANNOUNCE_MARK, INLINE_MARK, Doorbells, traced
from notifyhub.store.items import item_json, parse_item
from notifyhub.store.keys import INBOX_FIELDS, Keys, member
from notifyhub.store.scripts import InboxScripts, pipelined, queue_script, slot_node

UserRef = tuple[str, str]
"""(tenant, user)."""

ListStatus = Literal["all", "unread", "read", "archived", "snoozed"]

PENDING_PLACE_AT = 16
"""A deferred fan-out places the inboxes holding more pending copies than this."""

INLINE_MIN_USERS = 64
"""Placements for this many users or more ring with their copies' events (a second round
trip for the writer, no log read for each recipient's stream); smaller ones ring in
their writes' own pipeline."""
ANNOUNCE_FIELDS = ("state", "cnt", "seq")
"""The keys announce.lua reads per user."""
ANNOUNCE_BATCH = 1000
"""Users per announce.lua call: the first streams hear of a broadcast after one batch, and
no call holds Redis for long."""

SHARED_MAX_USERS = 32
"""Placements for at most this many users (a publish to a few users: the common case)
made in one event-loop tick share one pipeline (`InboxStore._shared`)."""
SHARED_MAX_PLACEMENTS = 8
"""Placements per shared pipeline (more in one tick take several, sent at once). Not all
of a tick's in one, which makes the hub wait out Redis' whole batch idle and then answer
every connection at once: the replies of the first pipeline come back while Redis runs
the rest, and the hub answers those meanwhile (docs/scaling.md, "Design notes")."""

FRESH_STATE = b"0|0||"
"""A new copy's state (unread, unseen, no category, no collapse key): lua/common.lua."""
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


def copy_content(notification: Notification) -> tuple[bytes, ThreadArgs | None]:
    """What each copy stores as its content, and its thread's part of `CopyArgs`: a
    threaded notification's content is its activity's own (lua/common.lua `copy` puts the
    thread's summary before it in the thread item)."""
    n = notification
    content = n.content_json()
    if not n.thread_key:
        return content, None
    created_ms = int(n.created_at.timestamp() * 1000)
    window_s = n.thread_window_s or DEFAULT_THREAD_WINDOW_S
    line = b""
    if n.actor is not None:
        line = n.actor.id.encode() + b"\t" + orjson.dumps(n.actor.model_dump(mode="json"))
    return content, ThreadArgs(n.thread_key, window_s * 1000, created_ms, line)


def _inlinable(n: Notification, *, pull: bool) -> bool:
    """Whether every copy's live event is the notification as it stands, so a doorbell
    may carry it inline: no category that preferences may silence, no collapse key, no
    thread, not `pull`."""
    return not (pull or n.category or n.collapse_key or n.thread_key)


def _members(users: Sequence[UserRef]) -> list[str]:
    """Each user's `T/U` (keys.member, without a call per user: a 100k fan-out's)."""
    return [f"{t}/{u}" for t, u in users]


def _slot_users(keys: list[str], stride: int) -> dict[int, list[int]]:
    """The users (indices) in each Cluster slot, `stride` keys per user, all in the
    user's slot."""
    by_slot: dict[int, list[int]] = {}
    for user, i in enumerate(range(0, len(keys), stride)):
        by_slot.setdefault(key_slot(keys[i].encode()), []).append(user)
    return by_slot


def _keys_of(keys: list[str], stride: int, users: list[int]) -> list[str]:
    """The keys of `users` (indices), user after user."""
    return [k for user in users for k in keys[user * stride : (user + 1) * stride]]


def _inline_header(content: bytes) -> bytes:
    """The first line of a doorbell carrying an inlinable notification's fresh copies."""
    return INLINE_MARK + item_json(content, FRESH_STATE)


class InboxStore:
    """Reads and writes of users' inboxes, and the Pub/Sub doorbell after each change."""

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
        self._redis = redis
        self._bulk = bulk or redis
        """For the big pipelines (fan-out, stream reads): a client without per-reply
        timers (`create_redis(socket_timeout_s=None)`); `scripts.pipelined` bounds them."""
        self._keys = keys
        self._limits = limits
        self._on_evicted = on_evicted or (lambda evicted: None)
        """Told how many oldest notifications full inboxes dropped (a metric)."""
        self.scripts = InboxScripts(redis)
        self._cluster = is_cluster(redis)
        self.doorbells = Doorbells(keys, sharded=self._cluster)
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
    ) -> list[int]:
        """`placement`'s seqs."""
        placed = await self.placement(
            notification, users, pull=pull, defer=defer, trace=trace, views=views
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
        (lists longer than PENDING_PLACE_AT are placed right away, bounding them).

        `trace` (a traceparent, when tracing is on) rides in the doorbell
        (store/doorbells.py `traced`). `views` (the tenant's, as the caller knows them):
        which of them the notification is in is worked out here once, instead of per user
        in the script (users whose copy of the views has another version evaluate them).
        """
        if not users:
            return Placement([], [])
        content, thread = copy_content(notification)
        expires_ms = int(notification.expires_at.timestamp() * 1000)
        members = _members(users)
        # The doorbell carries the copies' events when every copy is a fresh one (inlinable).
        n = notification
        inlinable = _inlinable(n, pull=pull) and not defer
        rings_inline = inlinable and self._cluster and len(users) >= INLINE_MIN_USERS
        tail = self._place_tail(content, members, trace, inlinable=inlinable, defer=defer)
        copy = self._copy_args(
            notification, content, expires_ms, pull=pull, views=views, thread=thread
        )
        script, args, fields = self._script_call(copy, tail, defer=defer)
        keys = self._keys.user_keys(members, fields)
        by_slot = self._slot_groups(keys, len(fields))
        recipients, expiry = self._keys.recipients(notification.id), self._keys.expiry
        indexes = [recipients, expiry] if tail is not None else []  # the script's last KEYS
        calls = [(slot, [*group, *indexes]) for slot, group in by_slot.items()]
        scripts_at = [0]  # where the script replies start among the pipeline's: counted

        def build(pipe: Any) -> None:
            first = len(pipe)  # a shared pipeline holds other placements' commands before
            if tail is None:  # (else the script writes them)
                self._queue_indexes(pipe, recipients, members, expires_ms)
            scripts_at[0] = len(pipe) - first
            for slot, call_keys in calls:  # (the Cluster client knows its nodes by now)
                queue_script(pipe, script, call_keys, args, node=slot_node(self._redis, slot))
            if not (self._cluster or inlinable):  # one connection: the doorbell follows the writes
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
        if self._cluster:
            ringing = reply if rings_inline and isinstance(reply, Placed) else None
            await self._ring_after_writes(members, ringing, content, trace)
        if defer:
            evicted += await self._place_long(users, seqs)
        if evicted:
            self._on_evicted(evicted)
        pushed_out = reply.pushed_out if isinstance(reply, Placed) else {}
        return Placement(seqs, reply.dropped, pushed_out)

    async def announce(
        self, notification: Notification, users: Sequence[UserRef], *, pull: bool = False
    ) -> int:
        """Tell the streams of `users` about an inlinable notification before its copies
        are written (a big broadcast's streams then wait for one message, not for every
        copy): announce.lua names each user who does not hold it yet with their seq and
        epoch now, ANNOUNCE_BATCH users per call, all in one round trip, in `^` doorbells
        (store/doorbells.py). A stream that has sent exactly that seq sends the
        notification at once and its copy's change later without it (realtime/sse.py).
        Only where the copy's event is the notification as it is (no category that
        preferences may silence, no collapse key, thread or `pull`). On one Redis each
        call publishes its doorbell; on a Cluster (whose script may not publish to
        another slot's shard channel) one call per slot group answers its lines and a
        second round trip publishes them per shard. Returns how many users were named."""
        n = notification
        if not (users and _inlinable(n, pull=pull)):
            return 0
        content, _ = copy_content(notification)
        header = ANNOUNCE_MARK + item_json(content, FRESH_STATE)
        members = _members(users)
        keys = self._keys.user_keys(members, ANNOUNCE_FIELDS)
        if self._cluster:
            return await self._announce_sharded(n.id, header, members, keys)
        channel, script = self.doorbells.channels[0], self.scripts.announce
        width = len(ANNOUNCE_FIELDS)

        def build(pipe: Any) -> None:
            for start in range(0, len(members), ANNOUNCE_BATCH):
                batch = members[start : start + ANNOUNCE_BATCH]
                batch_keys = keys[start * width : (start + len(batch)) * width]
                queue_script(pipe, script, batch_keys, [n.id, channel, header, *batch])

        return sum(int(named) for named in await pipelined(self._bulk, build, self.scripts.all))

    async def _announce_sharded(
        self, nid: str, header: bytes, members: list[str], keys: list[str]
    ) -> int:
        """`announce` on a Cluster: the lines of each slot group, then their doorbells."""
        width, script = len(ANNOUNCE_FIELDS), self.scripts.announce
        by_slot = _slot_users(keys, width)

        def build(pipe: Any) -> None:
            for slot, group in by_slot.items():
                group_keys = _keys_of(keys, width, group)
                args: list[str | bytes] = [nid, "", header, *(members[i] for i in group)]
                queue_script(pipe, script, group_keys, args, node=slot_node(self._redis, slot))

        replies = await pipelined(self._bulk, build, self.scripts.all)
        named = [line.decode().rpartition(" ") for reply in replies for line in reply]
        if named:
            changed = [(member, at) for member, _, at in named]
            await pipelined(
                self._bulk, lambda pipe: self.doorbells.queue(pipe, changed, header), []
            )
        return len(named)

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
        header = traced(_inline_header(content), trace)
        return PlaceTail(members, indexed=True, channel=self.doorbells.channels[0], header=header)

    def _queue_indexes(
        self, pipe: Any, recipients: str, members: list[str], expires_ms: int
    ) -> None:
        """The notification's recipient index (a recall finds every user a crash may have
        reached: it goes before the copies) and the users' expiry index (ZADD LT: a user's
        earlier expiry stays), as commands of their own."""
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
        )

    def _script_call(
        self, copy: CopyArgs, tail: PlaceTail | None, *, defer: bool
    ) -> tuple[AsyncScript, Args, tuple[str, ...]]:
        """The script for a placement, its ARGV, and the keys it takes per user."""
        if defer:
            fields = ("pend", "prefs") if copy.category else ("pend",)
            return self.scripts.defer, copy.defer_args(), fields
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
            header = _inline_header(content)
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
            slot: _keys_of(keys, stride, users) for slot, users in _slot_users(keys, stride).items()
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

    @property
    def limits(self) -> Limits:
        return self._limits

    async def _call(self, script: AsyncScript, tenant: str, user: str, args: Args) -> Any:
        """Run one inbox script on one user's keys (lua/common.lua `inbox`)."""
        return await script(keys=self._keys.inbox_list(tenant, user), args=args)

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

    async def sync_views(self, tenant: str, user: str, args: ViewsArgs) -> Synced:
        """Give the user these view definitions (unless they follow newer ones) and
        recount their views (lua/views.lua); streams get the counts as a `views` change."""
        synced = Synced.from_reply(
            await self._call(self.scripts.views, tenant, user, args.to_args())
        )
        await self._publish([(member(tenant, user), synced.seq)])
        return synced

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
    ) -> int:
        """Mark every unread item read, or archive every item (`action`); returns how
        many changed."""
        args = MarkAllArgs(self._limits.change_log_max, category, before_id, action)
        raw = await self._call(self.scripts.mark_all, tenant, user, args.to_args())
        marked = MarkedAll.from_reply(raw)
        await self._publish([(member(tenant, user), marked.seq)])
        return marked.updated

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

    async def purge(self, tenant: str, user: str) -> tuple[int, int | None]:
        """Drop the user's expired items; returns (purged, next expiry ms or None)."""
        args = LogMaxArgs(self._limits.change_log_max).to_args()
        purged = Dropped.from_reply(await self._call(self.scripts.purge, tenant, user, args))
        if purged.dropped:
            await self._publish([(member(tenant, user), purged.seq)])
        return purged.dropped, purged.next_expiry_ms

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


def _raise_first(replies: list[Any]) -> list[Any]:
    """`replies`, unless one is an error reply: then that error."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies
