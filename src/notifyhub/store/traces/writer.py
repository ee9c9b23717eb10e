"""Routing traces written behind their publishes: queued by `record`, written in batches."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from notifyhub.domain.notification import Notification
from notifyhub.store.client import is_cluster
from notifyhub.store.inbox.placing import Placement
from notifyhub.store.keys import Keys
from notifyhub.store.scripts import pipelined, queue_script, register_lua, slot_calls, slot_node
from notifyhub.store.traces.model import (
    CHANNELS,
    DELIVERED,
    PENDING,
    PUSHED_OUT,
    Route,
    RoutingTrace,
    all_pending,
    bucket_of,
    counted,
    escalation_field,
    outcome_of,
)
from notifyhub.store.traces.reader import read_trace
from notifyhub.turns import TURN_CHECK, Turns

log = logging.getLogger(__name__)

WRITE_BEHIND_S = 0.02
"""How long a queued trace waits for others to share its write: a write is one pipeline,
and redis-py's cost per pipeline is several traces' own, so longer waits make fewer,
fuller pipelines (docs/scaling.md, "Design notes")."""


MAX_QUEUED = 1000
"""Traces a process queues at most: the publish that fills the queue writes it."""


WRITE_VALUES = 2000
"""Fields and values one trace_write.lua call takes at most (a trace with more gets a
call of its own)."""


@dataclass(slots=True)
class _Queued:
    """A trace recorded, not written yet: its key, and its fields and values, flat."""

    key: str
    fields: list[bytes | str]


class RoutingTraces:
    """A process's routing traces: recorded after each publish and written behind it
    (the traces queued within WRITE_BEHIND_S share one round trip, a trace_write.lua call
    per Cluster slot); a read or a recall writes the queue first. A hub killed meanwhile
    loses those traces, as a Redis that loses data would: they explain deliveries, they
    are not deliveries. Bounded: the first `users` recipients each get a line, the rest
    are only counted; a trace expires after `ttl_s`."""

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
        self._write = register_lua(self._bulk, "trace_write")
        self._dropped = register_lua(self._redis, "trace_dropped")
        self._cluster = is_cluster(self._bulk)

    @property
    def enabled(self) -> bool:
        return self._users > 0

    async def record(
        self,
        notification: Notification,
        route: Route,
        users: Sequence[tuple[str, str]],
        placement: Placement | None,
    ) -> None:
        """One trace for a publish: the outcome of every recipient (`placement`'s answer;
        None for a deferred fan-out, whose users are all pending until their batch is
        placed), lines for the first `users` of them."""
        if not self.enabled:
            return
        recorded = min(len(users), self._users)
        deferred = placement is None
        if placement is None:  # (no list of 100,000 ones to count)
            placement = Placement([1] * recorded, [0] * recorded)
            outcomes = all_pending(len(users))
        else:
            outcomes = counted(placement.seqs)
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
            "outcomes": outcomes,
            "recorded": recorded,
        }
        lined = users[: self._users]
        buckets = await _lines(lined, seqs, route.sources_of(len(lined)), deferred=deferred)
        for i, out in placement.pushed_out.items():
            if i < len(lined):
                user = lined[i][1]
                detail: dict[str, Any] = {}
                if out.replaced:
                    detail["replaced"] = out.replaced
                if out.evicted:
                    detail["evicted"] = list(out.evicted)
                buckets.setdefault(bucket_of(user), {}).setdefault(PUSHED_OUT, {})[user] = detail
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
        """Write the queued traces, in one round trip of trace_write.lua calls (`slot_calls`); a
        failure is logged (the traces are lost, the publishes they explain are not)."""
        async with self._writing:
            queued, self._queued = self._queued, []
            if not queued:
                return
            entries = [(trace.key, trace.fields, len(trace.fields)) for trace in queued]
            calls = []  # (slot, KEYS, ARGV) of each trace_write.lua call
            for slot, call in slot_calls(entries, cluster=self._cluster, limit=WRITE_VALUES):
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

    async def channels_sent(
        self, notification_id: str, outcomes: dict[str, dict[str, str]], *, start: int = 0
    ) -> None:
        """Note users' outcomes beyond the inbox ({user: {channel: outcome}}, users from
        the `start`th recipient on) in the notification's trace, for the recorded users
        (the first `users`): fields of their own, so the trace written behind its publish
        (perhaps later, in another process) keeps them; a key made here expires as a
        trace does."""
        recorded = list(outcomes.items())[: max(0, self._users - start)]
        if not recorded:
            return
        key = self._keys.routing_trace(notification_id)
        fields = {CHANNELS + user: orjson.dumps(sent) for user, sent in recorded}
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            pipe.expire(key, self._ttl_s, nx=True)
            await pipe.execute()

    async def escalated(self, outcomes: Sequence[tuple[str, str, int, str]]) -> None:
        """Note escalation steps' outcomes, each (notification, user, step, outcome), in
        their notifications' traces, in one round trip; a key made here expires as a
        trace does."""
        if not outcomes:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for notification_id, user, step, outcome in outcomes:
                key = self._keys.routing_trace(notification_id)
                pipe.hset(key, escalation_field(user, step), outcome)
                pipe.expire(key, self._ttl_s, nx=True)
            await pipe.execute()

    async def dropped(self, notification_id: str, users: Sequence[str]) -> int:
        """A deferred fan-out's batch is placed and its `users` had their preferences
        drop it (no copy made): their lines, written `pending` at the publish, say
        `dropped_by_preference` as the immediate path's would, and the counts move with
        them (trace_dropped.lua). This process's queued traces are written first (the
        fan-out's own may still be queued); returns how many lines moved."""
        if not self.enabled or not users:
            return 0
        await self.flush()
        args: list[str | int] = [len(users)]
        for user in users:
            args += (bucket_of(user), user)
        key = self._keys.routing_trace(notification_id)
        return int(await self._dropped(keys=[key], args=args))

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
        by user id. This process's queued traces are written first, so it sees them."""
        await self.flush()
        key = self._keys.routing_trace(notification_id)
        return await read_trace(self._redis, key, user=user, limit=limit)


async def _lines(
    lined: Sequence[tuple[str, str]], seqs: list[int], sources: Sequence[str], *, deferred: bool
) -> dict[str, dict[str, dict[str, Any]]]:
    """The trace's buckets of per-user lines (`bucket_of`): each user's outcome by source,
    the loop's turn taken when due (a trace lines up to 10,000 users)."""
    buckets: dict[str, dict[str, dict[str, Any]]] = {}
    placed = PENDING if deferred else DELIVERED
    turns = Turns()
    for at, ((_tenant, user), seq, source) in enumerate(zip(lined, seqs, sources, strict=False)):
        if not at % TURN_CHECK:
            await turns.take()
        outcome = outcome_of(seq, placed)
        kept = seq if outcome == DELIVERED else 0
        bucket = buckets.setdefault(bucket_of(user), {})
        bucket.setdefault(f"{source}\t{outcome}", {})[user] = kept
    return buckets
