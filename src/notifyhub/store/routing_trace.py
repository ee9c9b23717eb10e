"""Routing traces: per notification, what routing decided for each recipient, so an
operator can answer "why did (or didn't) user X get it?".

Kept in Redis beside the notification's recipient index, not in PostgreSQL (a big
fan-out's rows would cost more than the fan-out), and written behind the publish:
`record` queues a trace, and the traces a process queued within WRITE_BEHIND_S share
one `_WRITE` script call per Cluster slot. A read of a trace (and a recall) writes its
process's queue first, so it sees every trace published there before it; another
process sees a trace up to WRITE_BEHIND_S later, and a hub killed meanwhile, like a
Redis that loses data, loses those traces (they explain deliveries, they are not
deliveries). Bounded: the first `users` recipients each get a line, the rest are only
counted; a trace expires after `ttl_s` (7 days by default). The numbers behind these
choices: docs/scaling.md, "Design notes".

    <p>n{id}:trace  hash  meta      JSON: tenant, created/expires, who was named, outcomes
                          b:<k>     JSON: the lines of the recorded users whose id's
                                    CRC-32 is k modulo BUCKETS, as {"<source>\t<outcome>":
                                    {user: seq (0 unless placed)}}, and under "x" what
                                    a copy pushed out: {user: {replaced, evicted}}
                          recalled  ms of the recall, if any
                          s:<user>  how many live streams were sent the user's copy's
                                    event, in every hub process (HINCRBY; recorded users
                                    only; absent: none)

Lines go in BUCKETS fields, grouped by (source, outcome), rather than a field or a JSON
object per user, so a big fan-out packs a few fields and a line is one dict entry.
Reading one user's line parses their bucket.

A line's source is where routing first reached the user: `user` (named directly),
`group:<name>`, `topic:<name>` (directly or through a group the topic lists), or, when a
rule or producer resolved the users itself, `rule:<name>` / `producer:<name>`. A user
reached through several is named by the first, in the order publish resolves them: users
named directly, then the groups in the order named, then the topics (services/ingest.py
`_resolve`). The resolution hands over runs of users (`Sources`: a few entries per
publish), not a source per user.

What a copy pushed out (the copy it replaced by collapse key, the oldest ones a full
inbox at `limits.items_per_user` evicted) comes in place.lua's own reply, which knows
it as it writes (`Placement.pushed_out`), so writing a trace reads nothing back.

"Streamed to K connections" is counted where the event is written: each stream that
sends a `notification` event (carried inline by a fan-out's doorbell, or read from the
log) tells its process's `StreamedTally` (realtime/sse.py), a dict; once a second (and
before a trace read in that process) the tally is added to the traces: one round trip of
`_METAS` calls reading their `meta`, then one of `_ADD` calls (a script HINCRBYing the
counts, each trace's given as one JSON argument, into the traces that still exist), a
call per USERS_PER_CALL traces or counts and Cluster slot, never a command per trace,
which would pause every stream once a second. Notifications with no trace (traces off
where it was published, or expired) get nothing, and of a trace with fewer lines than
recipients only the users with a line are counted (their buckets are read to tell), so
the `s:` fields of a trace are at most its lines. Processes add up. A copy that joined
the user's open thread is streamed as an update of the thread (named by the thread's id)
and is not counted; nor is a snoozed copy resurfacing. Cost: a dict increment per event
written, and a flush in calls of USERS_PER_CALL.

"Expired" is not recorded when a copy goes: expired copies leave in the inbox scripts
(every read drops them, the cleaner purges what nobody reads), which answer counts, not
ids; the admin endpoint says whether the notification's expiry has passed, at read time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import orjson
from redis.asyncio import Redis
from redis.crc import key_slot
from redis.exceptions import RedisError
from ulid import ULID

from notifyhub.domain.notification import Notification, Recipients
from notifyhub.store.client import is_cluster
from notifyhub.store.inbox import Placement
from notifyhub.store.keys import Keys
from notifyhub.store.scripts import pipelined, queue_script, slot_node

log = logging.getLogger(__name__)

T = TypeVar("T")

Sources = tuple[tuple[int, str], ...]
"""Where resolved recipients came from, in resolution order: (end, source) says the users
from the previous entry's end up to `end` (exclusive) were first reached through `source`
(`user`, `group:<name>`, `topic:<name>`)."""


class Outcome(StrEnum):
    DELIVERED = "delivered"
    """Placed: stored in the user's inbox, as their change `seq` (the public word)."""
    PENDING = "pending"
    """Left pending by a big fan-out: the user's next read makes the copy."""
    ALREADY_HELD = "already_held"
    """The user had it already (a retried publish)."""
    DROPPED_BY_PREFERENCE = "dropped_by_preference"
    """The user's preferences drop its category (`inbox: false`)."""


def _outcome(seq: int, placed: str) -> str:
    """What `InboxStore.place` answered for one user (their seq), as an outcome's value;
    `placed`: a new copy's (`delivered`, i.e. placed, or pending in a deferred fan-out).
    Values, not `Outcome` members: a member's `.value` is a property call, on every
    recipient."""
    if seq > 0:
        return placed
    return _ALREADY_HELD if seq == 0 else _DROPPED


@dataclass(frozen=True, slots=True)
class Route:
    """How the recipients were named: the users named directly, and which groups and
    topics, with where each resolved user came from (`sources`); or, for a rule or
    producer, its name."""

    users: frozenset[str] = frozenset()
    groups: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    origin: str = "publish"
    """`publish`, or who resolved the users (`rule:<name>`, `producer:<name>`): then it is
    every recipient's source."""
    sources: Sources = ()
    """A publish's: where its resolved users came from (the first source that reached a
    user; a user also in a named group or topic counts as named directly)."""

    @classmethod
    def of(cls, recipients: Recipients, sources: Sources = ()) -> Route:
        return cls(
            frozenset(recipients.users), recipients.groups, recipients.topics, sources=sources
        )

    def sources_of(self, count: int) -> list[str]:
        """The source of each of the first `count` resolved users: a list built from the
        runs, no lookup per user."""
        if self.origin != "publish":
            return [self.origin] * count
        found: list[str] = []
        start = 0
        for end, source in self.sources:
            if start >= count:
                break
            found += [source] * (min(end, count) - start)
            start = end
        found += ["user"] * (count - len(found))  # (a route without sources: users alone)
        return found


@dataclass(frozen=True, slots=True, order=True)
class TraceLine:
    user: str
    source: str
    outcome: Outcome
    seq: int | None
    replaced: str | None = None
    """The id of the user's copy with the same collapse key that this one replaced."""
    evicted: tuple[str, ...] = ()
    """The ids of the oldest notifications the user's full inbox dropped for this one."""
    streamed_to: int = 0
    """Live streams (every hub process's) that were sent the copy's event."""


@dataclass(frozen=True, slots=True)
class RoutingTrace:
    meta: dict[str, Any]
    lines: list[TraceLine]
    recalled_ms: int | None


WRITE_BEHIND_S = 0.02
"""How long a queued trace waits for others to share its write: a write is one pipeline,
and redis-py's cost per pipeline is several traces' own, so longer waits make fewer,
fuller pipelines (docs/scaling.md, "Design notes")."""


MAX_QUEUED = 1000
"""Traces a process queues at most: the publish that fills the queue writes it."""


WRITE_VALUES = 2000
"""Fields and values one `_WRITE` call takes at most (a trace with more gets a call of
its own)."""

_WRITE = """
-- Routing traces written behind their publishes (RoutingTraces.flush). KEYS: the traces;
-- ARGV[1]: their TTL (s); then, trace after trace, how many fields it has and its fields
-- and values. Returns how many traces were written.
local at = 2
for _, key in ipairs(KEYS) do
  local last = at + 2 * tonumber(ARGV[at])
  redis.call('HSET', key, unpack(ARGV, at + 1, last))
  redis.call('EXPIRE', key, ARGV[1])
  at = last + 1
end
return #KEYS
"""


@dataclass(slots=True)
class _Queued:
    """A trace recorded, not written yet: its key, and its fields and values, flat."""

    key: str
    fields: list[bytes | str]


def _script_calls(
    entries: Sequence[tuple[str, T, int]], *, cluster: bool, limit: int
) -> list[tuple[int, list[tuple[str, T]]]]:
    """Script calls for many keys, each `(key, value, weight)`: per call its Cluster slot
    (-1 on one Redis) and its entries, all of one slot (on one Redis, any), their weights
    adding up to `limit` at most unless a single entry weighs more."""
    groups: dict[int, list[tuple[str, T, int]]] = {}
    for entry in entries:
        groups.setdefault(key_slot(entry[0].encode()) if cluster else -1, []).append(entry)
    calls: list[tuple[int, list[tuple[str, T]]]] = []
    for slot, group in groups.items():
        call: list[tuple[str, T]] = []
        weight = 0
        for key, value, w in group:
            if call and weight + w > limit:
                calls.append((slot, call))
                call, weight = [], 0
            call.append((key, value))
            weight += w
        calls.append((slot, call))
    return calls


class RoutingTraces:
    def __init__(
        self, redis: Redis, keys: Keys, *, ttl_s: int, users: int, bulk: Redis | None = None
    ) -> None:
        self._redis = redis
        self._bulk = bulk or redis
        """For the write-behind pipelines: a client without per-reply timers (as
        `InboxStore`'s); `pipelined` bounds each pipeline as a whole."""
        self._keys = keys
        self._ttl_s = ttl_s
        self._users = users
        self._queued: list[_Queued] = []
        """Traces recorded, not written yet."""
        self._writer: asyncio.Task[None] | None = None
        """The task writing them after WRITE_BEHIND_S, while any are queued."""
        self._writing = asyncio.Lock()
        """One write at a time: a read's write waits for the writer's, so it sees it."""
        self._write = self._bulk.register_script(_WRITE)
        self._cluster = is_cluster(self._bulk)

    @property
    def enabled(self) -> bool:
        return self._users > 0

    async def record(
        self,
        notification: Notification,
        route: Route,
        users: Sequence[tuple[str, str]],
        placement: Placement,
        *,
        deferred: bool,
    ) -> None:
        """One trace for a publish: the outcome of every recipient (`placement`'s answer),
        lines for the first `users` of them."""
        if not self.enabled:
            return
        seqs = placement.seqs
        meta = {
            "tenant": notification.tenant,
            "created_at": notification.created_at,  # (orjson writes them as isoformat)
            "expires_at": notification.expires_at,
            "category": notification.category,
            "origin": route.origin,
            "named": {
                "users": len(route.users),
                "groups": list(route.groups),
                "topics": list(route.topics),
            },
            "resolved": len(users),
            "outcomes": _counted(seqs, deferred=deferred),
            "recorded": min(len(users), self._users),
        }
        buckets: dict[str, dict[str, dict[str, Any]]] = {}
        lined = users[: self._users]
        sources = route.sources_of(len(lined))
        placed = _PENDING if deferred else _DELIVERED
        for (_tenant, user), seq, source in zip(lined, seqs, sources, strict=False):
            outcome = _outcome(seq, placed)
            kept = seq if outcome == _DELIVERED else 0
            bucket = buckets.setdefault(_bucket(user), {})
            bucket.setdefault(f"{source}\t{outcome}", {})[user] = kept
        for i, out in placement.pushed_out.items():
            if i < len(lined):
                user = lined[i][1]
                detail: dict[str, Any] = {}
                if out.replaced:
                    detail["replaced"] = out.replaced
                if out.evicted:
                    detail["evicted"] = list(out.evicted)
                buckets.setdefault(_bucket(user), {}).setdefault(PUSHED_OUT, {})[user] = detail
        fields: list[bytes | str] = ["meta", orjson.dumps(meta)]
        for name, bucket in buckets.items():
            fields += (name, orjson.dumps(bucket))
        self._queued.append(_Queued(self._keys.routing_trace(notification.id), fields))
        if len(self._queued) >= MAX_QUEUED:
            await self.flush()
        elif self._writer is None:
            self._writer = asyncio.create_task(self._write_behind())

    async def _write_behind(self) -> None:
        await asyncio.sleep(WRITE_BEHIND_S)
        self._writer = None
        await self.flush()

    async def flush(self) -> None:
        """Write the queued traces, in one round trip of `_WRITE` calls (`_script_calls`); a
        failure is logged (the traces are lost, the publishes they explain are not)."""
        async with self._writing:
            queued, self._queued = self._queued, []
            if not queued:
                return
            entries = [(trace.key, trace.fields, len(trace.fields)) for trace in queued]
            calls = []  # (slot, KEYS, ARGV) of each `_WRITE` call
            for slot, call in _script_calls(entries, cluster=self._cluster, limit=WRITE_VALUES):
                args: list[Any] = [self._ttl_s]
                for _key, fields in call:
                    args += (len(fields) // 2, *fields)
                calls.append((slot, [key for key, _ in call], args))

            def build(pipe: Any) -> None:
                for slot, keys, args in calls:
                    queue_script(pipe, self._write, keys, args, node=slot_node(self._bulk, slot))

            try:
                await pipelined(self._bulk, build, [self._write])
            except RedisError as exc:
                log.warning("%d routing traces not recorded: %s", len(queued), exc)

    async def close(self) -> None:
        """Write what is queued (the hub is stopping)."""
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        await self.flush()

    async def recalled(self, notification_id: str, at_ms: int) -> None:
        """Note a recall in the notification's trace (if it still has one)."""
        await self.flush()
        key = self._keys.routing_trace(notification_id)
        if await self._redis.exists(key):
            await self._redis.hset(key, "recalled", at_ms)

    async def read(
        self, notification_id: str, *, user: str | None = None, limit: int = 100
    ) -> RoutingTrace | None:
        """The trace (None: none kept); its lines: `user`'s alone, or the first `limit`
        by user id."""
        await self.flush()
        key = self._keys.routing_trace(notification_id)
        buckets: list[bytes]
        streamed: dict[str, int] = {}
        if user is not None:
            meta, bucket, recalled, count = await self._redis.hmget(
                key, ["meta", _bucket(user), "recalled", STREAMED + user]
            )
            buckets = [bucket] if isinstance(bucket, bytes) else []
            if count is not None:
                streamed[user] = int(count)
        else:
            found: dict[bytes, bytes] = await self._redis.hgetall(key)  # type: ignore[assignment]
            meta, recalled = found.get(b"meta"), found.get(b"recalled")
            buckets = [raw for name, raw in found.items() if name.startswith(b"b:")]
            prefix = STREAMED.encode()
            streamed = {
                name[len(prefix) :].decode(): int(raw)
                for name, raw in found.items()
                if name.startswith(prefix)
            }
        if meta is None:
            return None
        lines = sorted(line for raw in buckets for line in _lines(orjson.loads(raw), streamed))
        if user is not None:
            lines = [line for line in lines if line.user == user]
        return RoutingTrace(orjson.loads(meta), lines[:limit], int(recalled) if recalled else None)


BUCKETS = 64
"""Fields the lines of one trace are spread over."""


def _bucket(user: str) -> str:
    return f"b:{zlib.crc32(user.encode()) % BUCKETS}"


def _counted(seqs: list[int], *, deferred: bool) -> dict[str, int]:
    """How many recipients had each outcome (`_outcome` of every seq, counted in C:
    a 100k fan-out's trace spent most of its time in a Python loop over the seqs), by
    outcome value."""
    dropped, held = seqs.count(-1), seqs.count(0)
    placed = len(seqs) - dropped - held
    return {
        _DELIVERED: 0 if deferred else placed,
        _PENDING: placed if deferred else 0,
        _ALREADY_HELD: held,
        _DROPPED: dropped,
    }


_DELIVERED, _PENDING, _ALREADY_HELD, _DROPPED = (
    Outcome.DELIVERED.value,
    Outcome.PENDING.value,
    Outcome.ALREADY_HELD.value,
    Outcome.DROPPED_BY_PREFERENCE.value,
)
"""The outcomes' values (`_outcome`)."""


PUSHED_OUT = "x"
"""A bucket's entry of what copies pushed out, by user."""

STREAMED = "s:"
"""Prefix of a trace's fields counting, per user, the streams sent the copy's event."""


def _lines(bucket: dict[str, dict[str, Any]], streamed: dict[str, int]) -> Iterator[TraceLine]:
    pushed_out = bucket.get(PUSHED_OUT, {})
    for kind, users in bucket.items():
        if kind == PUSHED_OUT:
            continue
        source, _, outcome = kind.rpartition("\t")
        for user, seq in users.items():
            extra = pushed_out.get(user, {})
            evicted = tuple(extra.get("evicted") or ())
            yield TraceLine(
                user,
                source,
                Outcome(outcome),
                seq or None,
                extra.get("replaced"),
                evicted,
                streamed.get(user, 0),
            )


def _lined_users(bucket: dict[str, dict[str, Any]]) -> Iterator[str]:
    """The users with a line in one bucket."""
    for kind, users in bucket.items():
        if kind != PUSHED_OUT:
            yield from users


TRACE_LATE_S = 5.0
"""How long after a notification's creation a flush that finds no trace for it keeps its
counts for the next one: the publishing process writes its traces behind the publish
(`RoutingTraces`), so another process's streams may count the copy first."""


def _created_ms(notification_id: str) -> float:
    """A notification's creation (its ULID's time), ms; 0 for an id that is not a ULID."""
    try:
        return float(ULID.from_str(notification_id).milliseconds)
    except ValueError:
        return 0.0


MAX_PENDING = 100_000
"""(notification, user) counts a process holds between flushes; more are not counted."""

FLUSH_S = 1.0
"""How often a process adds its streams' counts to the traces."""

USERS_PER_CALL = 1000
"""Counts one `_ADD` call adds at most (a broadcast's take several, in one round trip);
traces one `_METAS` call reads."""

_METAS = """
-- KEYS: routing traces. Each one's `meta` field (nil where the trace is gone).
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('HGET', key, 'meta') end
return out
"""

_ADD = """
-- KEYS: routing traces; ARGV[i]: JSON {user: count} for KEYS[i]. HINCRBY each `s:<user>`
-- of a trace that still exists (one expired since the flush read it is skipped: a trace
-- key is never made here). Returns how many counts were added.
local added = 0
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then
    for user, count in pairs(cjson.decode(ARGV[i])) do
      redis.call('HINCRBY', key, 's:' .. user, count)
      added = added + 1
    end
  end
end
return added
"""


class StreamedTally:
    """One process's count of the `notification` events its streams sent, per
    notification and user, until `flush` adds them to the routing traces (HINCRBY: every
    process adds its own). Made only when traces are on (`routing_trace_users` > 0)."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._add = redis.register_script(_ADD)
        self._metas = redis.register_script(_METAS)
        self._cluster = is_cluster(redis)
        self._pending: dict[str, dict[str, int]] = {}
        self._size = 0
        self._flushing = asyncio.Lock()
        """One flush at a time: a trace read's flush waits for the loop's, so the read
        sees every count made before it."""
        self.dropped = 0
        """Counts not kept: more than MAX_PENDING between two flushes."""

    def sent(self, notification_id: str, user: str, n: int = 1) -> None:
        """A stream of `user` was sent the event of their copy of `notification_id` (`n`
        times: counts a flush keeps for a trace not written yet come back this way)."""
        by_user = self._pending.get(notification_id)
        if by_user is not None and user in by_user:
            by_user[user] += n
        elif self._size >= MAX_PENDING:
            self.dropped += n
        else:
            if by_user is None:
                by_user = self._pending[notification_id] = {}
            by_user[user] = n
            self._size += 1

    async def flush(self) -> int:
        """Add what was counted since the last flush to the traces; how many (user,
        notification) counts were written. Counts of notifications with no trace, or of
        users without a line in theirs, are dropped."""
        async with self._flushing:
            pending, self._pending, self._size = self._pending, {}, 0
            if not pending:
                return 0
            return await self._flush(pending)

    async def _flush(self, pending: dict[str, dict[str, int]]) -> int:
        keys = {nid: self._keys.routing_trace(nid) for nid in pending}
        metas = await self._metas_of(list(keys.values()))
        writes: list[tuple[str, dict[str, int]]] = []
        partial: list[tuple[str, dict[str, int]]] = []
        now_ms = time.time() * 1000
        for (nid, key), meta in zip(keys.items(), metas, strict=True):
            if meta is None:  # no trace: traces off where it was published, or expired,
                if now_ms - _created_ms(nid) < TRACE_LATE_S * 1000:  # or not written yet
                    for user, n in pending[nid].items():  # kept for the next flush
                        self.sent(nid, user, n)
                continue
            found = orjson.loads(meta)
            lined = found["recorded"] >= found["resolved"]
            (writes if lined else partial).append((key, pending[nid]))
        if partial:
            writes += await self._lined(partial)
        return await self._write(writes)

    async def _lined(
        self, partial: list[tuple[str, dict[str, int]]]
    ) -> list[tuple[str, dict[str, int]]]:
        """The counts of users with a line, for traces lining only their first recipients
        (the buckets of the users counted are read: one pipelined HMGET per trace)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for key, counts in partial:
                pipe.hmget(key, sorted({_bucket(user) for user in counts}))
            replies = await pipe.execute()
        kept = []
        for (key, counts), buckets in zip(partial, replies, strict=True):
            lined = {u for raw in buckets if raw for u in _lined_users(orjson.loads(raw))}
            counted = {user: n for user, n in counts.items() if user in lined}
            if counted:
                kept.append((key, counted))
        return kept

    async def _metas_of(self, keys: list[str]) -> list[bytes | None]:
        """The `meta` of each trace (None: gone), in one round trip of `_METAS` calls (per
        Cluster slot, USERS_PER_CALL traces each), not a command per trace: a second's
        500 notifications cost redis-py 500 HGETs at once, a pause in every stream."""
        calls = _script_calls(
            [(key, None, 1) for key in keys], cluster=self._cluster, limit=USERS_PER_CALL
        )

        def build(pipe: Any) -> None:
            for slot, call in calls:
                batch = [key for key, _ in call]
                queue_script(pipe, self._metas, batch, [], node=slot_node(self._redis, slot))

        replies = await pipelined(self._redis, build, [self._metas])
        found = {
            key: meta
            for (_, call), reply in zip(calls, replies, strict=True)
            for (key, _), meta in zip(call, reply, strict=True)
        }
        return [found[key] for key in keys]

    async def _write(self, writes: list[tuple[str, dict[str, int]]]) -> int:
        """HINCRBY each count in its trace, in one round trip: `_ADD` calls of up to
        USERS_PER_CALL counts (per Cluster slot), each trace's counts as one JSON argument,
        not a command or two arguments per user (redis-py's packing and parsing grow with
        arguments, not bytes), nor a call per trace."""
        entries: list[tuple[str, bytes, int]] = []
        for key, counts in writes:
            users = list(counts.items())
            for i in range(0, len(users), USERS_PER_CALL):
                chunk = users[i : i + USERS_PER_CALL]
                entries.append((key, orjson.dumps(dict(chunk)), len(chunk)))
        if not entries:
            return 0
        calls = [
            (slot, [key for key, _ in call], [json for _, json in call])
            for slot, call in _script_calls(entries, cluster=self._cluster, limit=USERS_PER_CALL)
        ]

        def build(pipe: Any) -> None:
            for slot, keys, counts in calls:
                queue_script(pipe, self._add, keys, counts, node=slot_node(self._redis, slot))

        return sum(int(added) for added in await pipelined(self._redis, build, [self._add]))

    async def close(self) -> None:
        """The last flush, when the process stops (best effort)."""
        try:
            await self.flush()
        except RedisError as exc:
            log.warning("stream counts of routing traces not written: %s", exc)
