"""Every inbox script called on real Redis with known input, its reply decoded by its codec
(store/codecs.py): a value added, dropped or moved on either side fails here. Each step
also checks the change entries it appended against its row in store/operations.py."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis
from ulid import ULID

from notifyhub.settings import Limits, Settings
from notifyhub.store.changes import ChangeType, UnknownChangeType, UpdateChange
from notifyhub.store.codecs import (
    PLACED_WIDTH,
    ActArgs,
    Acted,
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
    Placed,
    PlaceTail,
    PushedOut,
    RemoveArgs,
    ResurfaceArgs,
    changes_from_reply,
)
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import INBOX_FIELDS, Keys
from notifyhub.store.operations import OPERATIONS, Operation

LOG_MAX = 100
EPOCH = re.compile(rb"[0-9a-f]{13,16}")
FRESH = b"0|0||"


class User:
    """One user's inbox and the scripts, called the way InboxStore calls them."""

    def __init__(self, redis: Redis, settings: Settings, name: str) -> None:
        self.keys = Keys(settings.redis_prefix)
        self.store = InboxStore(redis, self.keys, Limits())
        self.scripts = self.store.scripts
        self.inbox = self.keys.inbox_list("default", name)
        self.seen_seq = 0

    async def call(self, name: str, args: list[Any]) -> Any:
        return await getattr(self.scripts, name)(keys=self.inbox, args=args)

    async def appended(self, op: Operation) -> list[ChangeType]:
        """The types of the entries logged since the last look; each must be one the
        operation's row declares."""
        args = ChangesArgs(self.seen_seq, 100, 1 << 20).to_args()
        changes = changes_from_reply(await self.call("changes", args))
        types = [c.entry.type for c in changes.entries]
        assert set(types) <= set(OPERATIONS[op].appends), (op, types)
        self.seen_seq = changes.seq
        return types


def copy_args(*, cap: int = 0, ttl_s: int = 600, content: bytes = b'{"title":"t"}') -> CopyArgs:
    expires = datetime.now(UTC) + timedelta(seconds=ttl_s)
    return CopyArgs(
        id=str(ULID()),
        content=content,
        category="",
        collapse_key="",
        expires_ms=int(expires.timestamp() * 1000),
        log_max=LOG_MAX,
        critical=False,
        pull=False,
        items_per_user=cap,
    )


async def test_deliver_answers_its_width_per_user(redis: Redis, settings: Settings) -> None:
    u = User(redis, settings, "layout-place")
    first = copy_args(cap=1)
    raw = await u.call("place", first.place_args())
    # one user, then what copies pushed out (nothing: no line, a count of 0), then the
    # evictions in all
    assert len(raw) == PLACED_WIDTH + 2
    delivered = Placed.from_reply(raw)
    [(seq, dropped, unread, unseen, total, epoch, views)] = delivered.copies()
    assert (seq, dropped, unread, unseen, total, views, delivered.evicted) == (1, 0, 1, 1, 1, 0, 0)
    assert EPOCH.fullmatch(epoch)
    assert delivered.firsts == [1]
    assert await u.appended(Operation.PLACE) == [ChangeType.NOTIFICATION]

    again = Placed.from_reply(await u.call("place", first.place_args()))
    assert list(again.copies()) == [(0, 0, 0, 0, 0, b"", 0)]  # held already: nothing stored

    # The counts are those right after the copy; the cap then evicts the first one.
    second = Placed.from_reply(await u.call("place", copy_args(cap=1).place_args()))
    assert list(second.copies()) == [(2, 1, 2, 2, 2, epoch, 0)]
    assert second.evicted == 1
    assert second.pushed_out == {0: PushedOut(None, (first.id,))}
    types = await u.appended(Operation.PLACE)
    assert types == [ChangeType.NOTIFICATION, ChangeType.DELETE]


async def test_place_writes_both_indexes_when_its_tail_says(
    redis: Redis, settings: Settings
) -> None:
    """On one Redis place.lua writes the notification's recipient index and the expiry
    index itself (its tail's `indexed`, the last two KEYS), a thousand users per command
    (1,001 here: two of them); a tail without a channel rings no doorbell."""
    keys = Keys(settings.redis_prefix)
    members = [f"default/layout-index-{i}" for i in range(1001)]
    note = copy_args()
    recipients = keys.recipients(note.id)
    user_keys = keys.user_keys(members, INBOX_FIELDS)
    tail = PlaceTail(members, indexed=True)
    async with redis.pubsub() as doorbells:
        await doorbells.psubscribe(f"{settings.redis_prefix}*")
        await doorbells.get_message(timeout=1)  # the subscription's confirmation
        raw = await InboxStore(redis, keys, Limits()).scripts.place(
            keys=[*user_keys, recipients, keys.expiry], args=note.place_args(tail)
        )
        assert await doorbells.get_message(timeout=0.2) is None
    assert Placed.from_reply(raw).firsts == [1] * len(members)
    assert await redis.smembers(recipients) == {m.encode() for m in members}
    assert await redis.expiretime(recipients) == note.expires_ms // 1000 + 1
    scores = await redis.zmscore(keys.expiry, members)
    assert scores == [float(note.expires_ms)] * len(members)


async def test_defer_then_place_pending(redis: Redis, settings: Settings) -> None:
    u = User(redis, settings, "layout-defer")
    pend = u.keys.inbox("default", "layout-defer").pend
    note = copy_args()
    raw = await u.scripts.defer(keys=[pend], args=note.defer_args())
    deferred = Deferred.from_reply(raw)
    assert (deferred.firsts, deferred.evicted) == ([1], 0)
    assert await u.call("place_pending", []) == 0
    assert await u.appended(Operation.PLACE_PENDING) == [ChangeType.NOTIFICATION]
    found = Found.from_reply(await u.call("get", GetArgs(LOG_MAX, note.id).to_args()))
    assert found == Found(note.content, FRESH)


async def test_a_scheduled_copy_is_indexed_by_its_arrival(redis: Redis, settings: Settings) -> None:
    """`arrived_ms` (a scheduled notification's delivery, later than its id's time), as
    place.lua's ARGV and as a pending entry's header: the copy is indexed as a moved one
    (lua/common.lua `sort_key`), its state says when (`r<ms>`), and another offer of its
    id, arriving later again, writes nothing."""
    u = User(redis, settings, "layout-arrived")
    inbox = u.keys.inbox("default", "layout-arrived")
    accepted_ms = int(time.time() * 1000) - 60_000
    placed, deferred = (
        replace(
            copy_args(),
            id=str(ULID.from_timestamp(accepted_ms / 1000)),
            arrived_ms=accepted_ms + 60_000 + k,
        )
        for k in (0, 1)
    )
    assert Placed.from_reply(await u.call("place", placed.place_args())).firsts == [1]
    await u.scripts.defer(keys=[inbox.pend], args=deferred.defer_args())
    assert await u.call("place_pending", []) == 0
    again = replace(placed, arrived_ms=placed.arrived_ms + 5)
    assert Placed.from_reply(await u.call("place", again.place_args())).firsts == [0]

    members = [m.decode() for m in await redis.zrange(inbox.time, 0, -1)]
    arrivals = [str(ULID.from_timestamp(n.arrived_ms / 1000))[:10] for n in (placed, deferred)]
    assert [(m[:10], len(m)) for m in members] == [(t, 36) for t in arrivals]
    for note in (placed, deferred):
        found = Found.from_reply(await u.call("get", GetArgs(LOG_MAX, note.id).to_args()))
        assert found == Found(note.content, FRESH + b"\x1fr%d" % note.arrived_ms)


async def test_read_and_change_scripts(redis: Redis, settings: Settings) -> None:
    u = User(redis, settings, "layout-change")
    a, b, c = copy_args(), copy_args(), copy_args(ttl_s=3600)
    for note in (a, b, c):
        await u.call("place", note.place_args())
    await u.appended(Operation.PLACE)

    counted = Counted.from_reply(await u.call("counts", LogMaxArgs(LOG_MAX).to_args()))
    assert (counted.unread, counted.unseen, counted.total, counted.seq) == (3, 3, 3, 3)
    assert EPOCH.fullmatch(counted.epoch.encode())

    page = PageArgs(LOG_MAX, "desc", "+", 2, "all", None, 2000)
    paged = Paged.from_reply(await u.call("page", page.to_args()))
    assert paged.next_cursor == b.id and paged.unread == 3
    assert paged.rows == [(c.id.encode(), c.content, FRESH), (b.id.encode(), b.content, FRESH)]

    mark = MarkArgs(LOG_MAX, read=True, seen=False, ids=[a.id, "missing", a.id])
    assert Marked.from_reply(await u.call("mark", mark.to_args())) == Marked(4, [2, 0, 1])
    [update] = await u.appended(Operation.MARK)
    assert update is ChangeType.UPDATE

    marked_all = MarkedAll.from_reply(
        await u.call("mark_all", MarkAllArgs(LOG_MAX, None, c.id).to_args())
    )
    assert marked_all == MarkedAll(5, 1)  # b only: a is read, c is not before c
    assert await u.appended(Operation.MARK_ALL) == [ChangeType.UPDATE]

    removed = Dropped.from_reply(await u.call("remove", RemoveArgs(LOG_MAX, [a.id]).to_args()))
    assert removed == Dropped(6, 1, b.expires_ms)  # the next expiry left: b's
    assert await u.appended(Operation.REMOVE) == [ChangeType.DELETE]

    purged = Dropped.from_reply(await u.call("purge", LogMaxArgs(LOG_MAX).to_args()))
    assert purged == Dropped(6, 0, b.expires_ms)
    assert await u.appended(Operation.PURGE) == []

    changes = changes_from_reply(await u.call("changes", ChangesArgs(3, 10, 1 << 20).to_args()))
    assert (changes.seq, changes.oldest_logged) == (6, 1)
    assert [c.entry.seq for c in changes.entries] == [4, 5, 6]
    update_a = changes.entries[0].entry
    assert isinstance(update_a, UpdateChange)
    assert (update_a.id, update_a.seen, update_a.read_at_ms > 0) == (a.id, True, True)
    assert (update_a.counts.unread, update_a.counts.total) == (2, 3)

    recalled = Dropped.from_reply(await u.call("recall", RemoveArgs(LOG_MAX, [b.id]).to_args()))
    assert recalled == Dropped(7, 1, c.expires_ms)
    assert await u.appended(Operation.RECALL) == [ChangeType.DELETE]
    again = Dropped.from_reply(await u.call("recall", RemoveArgs(LOG_MAX, [b.id]).to_args()))
    assert again == Dropped(0, 0, c.expires_ms)


async def test_state_flags_and_resurface(redis: Redis, settings: Settings) -> None:
    """archived / pinned / snoozed ride in mark's ARGV and the state's flags; a refused
    pin is code 3; resurface answers {seq} and appends a notification entry."""
    u = User(redis, settings, "layout-flags")
    a, b = copy_args(), copy_args()
    for note in (a, b):
        await u.call("place", note.place_args())
    await u.appended(Operation.PLACE)
    until = int(datetime.now(UTC).timestamp() * 1000) + 60_000
    mark = MarkArgs(LOG_MAX, None, False, [a.id], archived=True, pinned=True, pin_max=1)
    assert Marked.from_reply(await u.call("mark", mark.to_args())) == Marked(3, [2])
    refused = MarkArgs(LOG_MAX, None, False, [b.id], pinned=True, pin_max=1)
    assert Marked.from_reply(await u.call("mark", refused.to_args())) == Marked(0, [3])
    snooze = MarkArgs(LOG_MAX, None, False, [b.id], snooze_until_ms=until)
    assert Marked.from_reply(await u.call("mark", snooze.to_args())) == Marked(4, [2])
    assert await u.appended(Operation.MARK) == [ChangeType.UPDATE] * 2
    states = await redis.hmget(u.keys.inbox("default", "layout-flags").state, [a.id, b.id])
    assert states == [b"0|0||\x1fap", b"0|0||\x1fs" + str(until).encode()]
    counted = Counted.from_reply(await u.call("counts", LogMaxArgs(LOG_MAX).to_args()))
    assert (counted.unread, counted.total) == (0, 0)  # archived and snoozed: out

    assert await u.call("resurface", ResurfaceArgs(LOG_MAX, b.id, until - 1).to_args()) == [0]
    assert await u.call("resurface", ResurfaceArgs(LOG_MAX, b.id, until).to_args()) == [5]
    [entry] = await u.appended(Operation.RESURFACE)
    assert entry is ChangeType.NOTIFICATION
    counted = Counted.from_reply(await u.call("counts", LogMaxArgs(LOG_MAX).to_args()))
    assert (counted.unread, counted.total) == (1, 1)


async def test_act_completes_once(redis: Redis, settings: Settings) -> None:
    """act answers {seq, code, "k@ms"}: the first completion marks the copy read and
    logs an update naming the action; a second is code 1 with the first's outcome; the
    flag survives a later mark; a missing copy is code 0."""
    u = User(redis, settings, "layout-act")
    a = copy_args()
    await u.call("place", a.place_args())
    await u.appended(Operation.PLACE)
    at = 1_700_000_000_123
    first = Acted.from_reply(await u.call("act", ActArgs(LOG_MAX, a.id, 2, "no", at).to_args()))
    assert first == Acted(2, 2, (2, at))
    [entry] = await u.appended(Operation.ACT)
    assert entry is ChangeType.UPDATE
    again = ActArgs(LOG_MAX, a.id, 1, "yes").to_args()
    assert Acted.from_reply(await u.call("act", again)) == Acted(0, 1, (2, at))
    missing = ActArgs(LOG_MAX, str(ULID()), 1, "yes").to_args()
    assert Acted.from_reply(await u.call("act", missing)) == Acted(0, 0, None)
    pin = MarkArgs(LOG_MAX, False, False, [a.id], pinned=True, pin_max=5)
    assert Marked.from_reply(await u.call("mark", pin.to_args())) == Marked(3, [2])
    state = await redis.hget(u.keys.inbox("default", "layout-act").state, a.id)
    assert state == b"0|1||\x1fpc2@" + str(at).encode()
    counted = Counted.from_reply(await u.call("counts", LogMaxArgs(LOG_MAX).to_args()))
    assert (counted.unread, counted.total) == (1, 1)  # marked unread again, still done


async def test_an_unknown_change_type_fails_the_read(redis: Redis, settings: Settings) -> None:
    """A log entry of a type this code does not know is an error, never a `delete`."""
    u = User(redis, settings, "layout-unknown")
    await u.call("place", copy_args().place_args())
    entry = {"type": "archive", "id": "x", "seq": 2, "counts": {}}
    log = u.keys.inbox("default", "layout-unknown").log
    await redis.zadd(log, {orjson.dumps(entry): 2})
    await redis.set(u.keys.inbox("default", "layout-unknown").seq, 2)
    with pytest.raises(UnknownChangeType):
        await u.store.changes("default", "layout-unknown", 0, 10)
