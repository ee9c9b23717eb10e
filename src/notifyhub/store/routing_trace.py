"""Routing traces: per notification, what routing decided for each recipient, so an
operator can answer "why did (or didn't) user X get it?".

Kept in Redis, next to the notification's recipient index, not in PostgreSQL: a trace is
written on the fan-out's own path (one pipelined HSET per batch of recipients, in the
round trip after the copies), where inserting 100k rows into PostgreSQL would cost more
than the fan-out. It is bounded: the first `users` recipients each get a line, the rest
are only counted; and it expires after `ttl_s` (7 days by default). Losing Redis loses
the traces (they explain deliveries, they are not deliveries).

    <p>n{id}:trace  hash  meta      JSON: tenant, created/expires, who was named, outcomes
                          b:<k>     JSON: the lines of the recorded users whose id's
                                    CRC-32 is k modulo BUCKETS, as {"<source>\t<outcome>":
                                    {user: seq (0 unless delivered)}}, and under "x" what
                                    a copy pushed out: {user: {replaced, evicted}}
                          recalled  ms of the recall, if any

Lines go in BUCKETS fields, grouped by (source, outcome), rather than a field or a JSON
object per user: a 100k fan-out's 10,000 lines as 10,000 fields cost the publish 40 ms
in redis-py packing the HSET, and as 10,000 dicts 35 ms more in a big process, most of it
the garbage collector's; this way a line is one dict entry. Reading one user's line
parses their bucket (about 160 lines).

What a copy pushed out is read back from the user's change log, where those `delete`
changes follow the copy's seq: only for copies that replaced or evicted something (a
collapse key, or an inbox at `limits.items_per_user`), so a plain fan-out reads nothing.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
from redis.asyncio import Redis

from notifyhub.domain.notification import Notification, Recipients
from notifyhub.store.changes import DeleteChange, NotificationChange
from notifyhub.store.inbox import ChangeRead, InboxStore, Placement
from notifyhub.store.keys import Keys


class Outcome(StrEnum):
    DELIVERED = "delivered"
    """Stored in the user's inbox, as their change `seq`."""
    PENDING = "pending"
    """Left pending by a big fan-out: the user's next read makes the copy."""
    ALREADY_HELD = "already_held"
    """The user had it already (a retried publish)."""
    DROPPED_BY_PREFERENCE = "dropped_by_preference"
    """The user's preferences drop its category (`inbox: false`)."""


def outcome_of(seq: int, *, deferred: bool) -> Outcome:
    """What `InboxStore.place` answered for one user, as a trace outcome."""
    if seq < 0:
        return Outcome.DROPPED_BY_PREFERENCE
    if seq == 0:
        return Outcome.ALREADY_HELD
    return Outcome.PENDING if deferred else Outcome.DELIVERED


@dataclass(frozen=True, slots=True)
class Route:
    """How the recipients were named: the users named directly (a user also in a named
    group or topic counts as named directly), and which groups and topics; or, for a rule
    or producer, its name."""

    users: frozenset[str] = frozenset()
    groups: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    origin: str = "publish"
    """`publish`, or who resolved the users (`rule:<name>`, `producer:<name>`)."""

    @classmethod
    def of(cls, recipients: Recipients) -> Route:
        return cls(frozenset(recipients.users), recipients.groups, recipients.topics)

    def source(self, user: str) -> str:
        if self.origin != "publish":
            return self.origin
        if user in self.users:
            return "user"
        return "group or topic"


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


@dataclass(frozen=True, slots=True)
class RoutingTrace:
    meta: dict[str, Any]
    lines: list[TraceLine]
    recalled_ms: int | None


class RoutingTraces:
    def __init__(
        self, redis: Redis, keys: Keys, *, ttl_s: int, users: int, store: InboxStore | None = None
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl_s = ttl_s
        self._users = users
        self._store = store
        """Where what a copy replaced or evicted is read back from (None: not read)."""

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
        pushed_out = {} if deferred else await self._pushed_out(notification, users, placement)
        counted = _counted(seqs, deferred=deferred)
        meta = {
            "tenant": notification.tenant,
            "created_at": notification.created_at.isoformat(),
            "expires_at": notification.expires_at.isoformat(),
            "category": notification.category,
            "origin": route.origin,
            "named": {
                "users": len(route.users),
                "groups": list(route.groups),
                "topics": list(route.topics),
            },
            "resolved": len(users),
            "outcomes": {outcome.value: counted[outcome] for outcome in Outcome},
            "recorded": min(len(users), self._users),
        }
        buckets: dict[str, dict[str, dict[str, Any]]] = {}
        for (_tenant, user), seq in zip(users[: self._users], seqs, strict=False):
            outcome = outcome_of(seq, deferred=deferred)
            kind = f"{route.source(user)}\t{outcome.value}"
            bucket = buckets.setdefault(_bucket(user), {})
            bucket.setdefault(kind, {})[user] = seq if outcome is Outcome.DELIVERED else 0
            if user in pushed_out:
                bucket.setdefault(PUSHED_OUT, {})[user] = pushed_out[user]
        fields = {"meta": orjson.dumps(meta)}
        fields.update((name, orjson.dumps(lines)) for name, lines in buckets.items())
        key = self._keys.routing_trace(notification.id)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            pipe.expire(key, self._ttl_s)
            await pipe.execute()

    async def _pushed_out(
        self, notification: Notification, users: Sequence[tuple[str, str]], placement: Placement
    ) -> dict[str, dict[str, Any]]:
        """Per traced user whose copy replaced or evicted something: `replaced` and
        `evicted`, read back from their log (one pipelined read for all of them)."""
        if self._store is None:
            return {}
        reads = [
            ChangeRead(tenant, user, seq - 1, 1 + dropped)
            for (tenant, user), seq, dropped in zip(
                users[: self._users], placement.seqs, placement.dropped, strict=False
            )
            if seq > 0 and (dropped or notification.collapse_key)
        ]
        if not reads:
            return {}
        found: dict[str, dict[str, Any]] = {}
        for read, changes in zip(reads, await self._store.changes_many(reads), strict=True):
            entries = [change.entry for change in changes.entries]
            first = entries[0] if entries else None
            if not (isinstance(first, NotificationChange) and first.id == notification.id):
                continue  # the log moved on past it (trimmed): nothing to say
            detail: dict[str, Any] = {}
            if first.replaces:
                detail["replaced"] = first.replaces
            evicted = [e.id for e in entries[1:] if isinstance(e, DeleteChange)]
            if evicted:
                detail["evicted"] = evicted
            if detail:
                found[read.user] = detail
        return found

    async def recalled(self, notification_id: str, at_ms: int) -> None:
        """Note a recall in the notification's trace (if it still has one)."""
        key = self._keys.routing_trace(notification_id)
        if await self._redis.exists(key):
            await self._redis.hset(key, "recalled", at_ms)

    async def read(
        self, notification_id: str, *, user: str | None = None, limit: int = 100
    ) -> RoutingTrace | None:
        """The trace (None: none kept); its lines: `user`'s alone, or the first `limit`
        by user id."""
        key = self._keys.routing_trace(notification_id)
        buckets: list[bytes]
        if user is not None:
            meta, bucket, recalled = await self._redis.hmget(
                key, ["meta", _bucket(user), "recalled"]
            )
            buckets = [bucket] if isinstance(bucket, bytes) else []
        else:
            found: dict[bytes, bytes] = await self._redis.hgetall(key)  # type: ignore[assignment]
            meta, recalled = found.get(b"meta"), found.get(b"recalled")
            buckets = [raw for name, raw in found.items() if name.startswith(b"b:")]
        if meta is None:
            return None
        lines = sorted(line for raw in buckets for line in _lines(orjson.loads(raw)))
        if user is not None:
            lines = [line for line in lines if line.user == user]
        return RoutingTrace(orjson.loads(meta), lines[:limit], int(recalled) if recalled else None)


BUCKETS = 64
"""Fields the lines of one trace are spread over."""


def _bucket(user: str) -> str:
    return f"b:{zlib.crc32(user.encode()) % BUCKETS}"


def _counted(seqs: list[int], *, deferred: bool) -> dict[Outcome, int]:
    """How many recipients had each outcome (`outcome_of` for every seq, counted in C:
    a 100k fan-out's trace spent most of its time in a Python loop over the seqs)."""
    dropped, held = seqs.count(-1), seqs.count(0)
    placed = len(seqs) - dropped - held
    return {
        Outcome.DELIVERED: 0 if deferred else placed,
        Outcome.PENDING: placed if deferred else 0,
        Outcome.ALREADY_HELD: held,
        Outcome.DROPPED_BY_PREFERENCE: dropped,
    }


PUSHED_OUT = "x"
"""A bucket's entry of what copies pushed out, by user."""


def _lines(bucket: dict[str, dict[str, Any]]) -> Iterator[TraceLine]:
    pushed_out = bucket.get(PUSHED_OUT, {})
    for kind, users in bucket.items():
        if kind == PUSHED_OUT:
            continue
        source, _, outcome = kind.partition("\t")
        for user, seq in users.items():
            extra = pushed_out.get(user, {})
            evicted = tuple(extra.get("evicted") or ())
            yield TraceLine(
                user, source, Outcome(outcome), seq or None, extra.get("replaced"), evicted
            )
