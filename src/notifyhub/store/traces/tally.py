"""Counting, per notification and user, the live streams sent a copy's event, into traces."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError
from ulid import ULID

from notifyhub.store.client import is_cluster
from notifyhub.store.keys import Keys
from notifyhub.store.scripts import pipelined, queue_script, register_lua, slot_calls, slot_node
from notifyhub.store.traces.model import bucket_of, lined_users

log = logging.getLogger(__name__)

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
"""Counts one trace_add.lua call adds at most (a broadcast's take several, in one round
trip); traces one trace_metas.lua call reads."""


class StreamedTally:
    """One process's count of the `notification` events its streams sent, per
    notification and user, until `flush` adds them to the routing traces (HINCRBY: every
    process adds its own). Made only when traces are on (`routing_trace_users` > 0).

    Each stream that sends a `notification` event (inline from a doorbell, or read from
    the log) counts it here (realtime/sse.py); once a second (and before a trace read in
    this process) a flush reads the traces' `meta` in one round trip and HINCRBYs the
    counts in a second, a call per USERS_PER_CALL traces or counts and Cluster slot,
    never a command per trace. Notifications with no trace get nothing; of a trace with
    fewer lines than recipients only the users with a line are counted, so its `s:`
    fields are at most its lines. A copy that joined an open thread, or a snoozed copy
    resurfacing, is not counted."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._add = register_lua(redis, "trace_add")
        self._metas = register_lua(redis, "trace_metas")
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
                pipe.hmget(key, sorted({bucket_of(user) for user in counts}))
            replies = await pipe.execute()
        kept = []
        for (key, counts), buckets in zip(partial, replies, strict=True):
            lined = {u for raw in buckets if raw for u in lined_users(orjson.loads(raw))}
            counted = {user: n for user, n in counts.items() if user in lined}
            if counted:
                kept.append((key, counted))
        return kept

    async def _metas_of(self, keys: list[str]) -> list[bytes | None]:
        """The `meta` of each trace (None: gone), in one round trip of trace_metas.lua calls (per
        Cluster slot, USERS_PER_CALL traces each), not a command per trace: a second's
        500 notifications cost redis-py 500 HGETs at once, a pause in every stream."""
        calls = slot_calls(
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
        """HINCRBY each count in its trace, in one round trip: trace_add.lua calls of up to
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
            for slot, call in slot_calls(entries, cluster=self._cluster, limit=USERS_PER_CALL)
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
