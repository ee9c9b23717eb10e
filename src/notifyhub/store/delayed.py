"""The delayed queue in Redis: N sets of sorted sets per queue (tenant, name), every
step one Lua script."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from notifyhub.store.keys import DelayedKeys, Keys, Queue
from notifyhub.store.scripts import pipelined, queue_script

DQ_SCRIPTS = (
    "dq_push",
    "dq_move",
    "dq_reserve",
    "dq_finish",
    "dq_status",
    "dq_stats",
    "dq_forget",
)


def _source(name: str) -> str:
    return (files("notifyhub.store") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True, slots=True)
class Reserved:
    id: str
    message: bytes
    receipt: str
    score: float


@dataclass(frozen=True, slots=True)
class Moved:
    set_index: int
    queue: Queue
    oldest_due_age_ms: int
    """-1 when nothing is due."""
    backlog: int
    next_due_at: float | None
    """`time.monotonic()` when the earliest message still delayed falls due; None if none."""
    moved: list[str]
    reoffered: list[str]


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's messages over every set, as Redis holds them."""

    queue: Queue
    delayed: int
    """Waiting for their due time (due ones the mover has not moved yet included)."""
    ready: int
    """Due, waiting for a consumer."""
    in_flight: int
    """Taken by a consumer, not yet acked (offered again after their `ttl_ms`)."""
    oldest_age_ms: int | None
    """How long ago the earliest due message a consumer could take fell due; None: none."""


class DelayedStore:
    def __init__(self, redis: Redis, keys: Keys, sets: int) -> None:
        self._redis = redis
        self._keys = keys
        self.sets = sets
        common = _source("dq_common")
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(common + "\n" + _source(name)) for name in DQ_SCRIPTS
        }

    def _set(self, message_id: str) -> DelayedKeys:
        return self._keys.delayed(self._keys.delayed_set(message_id, self.sets))

    async def push_many(self, messages: list[tuple[str, Queue, bytes, int, int, int]]) -> int:
        """Pipelined pushes of (id, queue, message, due_ms, priority, ttl_ms); returns how
        many were new. Each push is still its own atomic script."""

        def build(pipe: Any) -> None:
            for message_id, queue, message, due_ms, priority, ttl_ms in messages:
                k, name = self._set(message_id), queue.key
                keys = [k.due(name), k.state, k.msg, k.queues]
                args: list[str | bytes | int] = [
                    message_id,
                    message,
                    due_ms,
                    name,
                    priority,
                    ttl_ms,
                ]
                queue_script(pipe, self._scripts["dq_push"], keys, args)

        results = await pipelined(self._redis, build, self._scripts.values())
        return sum(int(r) for r in results)

    async def move(self, set_index: int, queue: Queue, limit: int) -> Moved:
        k, name = self._keys.delayed(set_index), queue.key
        keys = [k.due(name), k.ready(name), k.reserved(name), k.state, k.due_v1(name), k.queues]
        raw = await self._scripts["dq_move"](keys=keys, args=[limit, name])
        oldest, backlog, next_due_ms, n_moved = (int(v) for v in raw[:4])
        next_due_at = time.monotonic() + next_due_ms / 1000 if next_due_ms >= 0 else None
        ids: list[str] = list(map(_text, raw[4:]))
        return Moved(set_index, queue, oldest, backlog, next_due_at, ids[:n_moved], ids[n_moved:])

    async def queues(self, set_index: int) -> list[Queue]:
        """The queues with messages in one set, every tenant's (the mover's work list; the
        mover drops a queue it leaves empty)."""
        members = await self._redis.smembers(self._keys.delayed(set_index).queues)
        return [Queue.from_key(_text(key)) for key in sorted(members)]

    async def all_queues(self) -> list[Queue]:
        """Every tenant's queues holding a message in Redis, or emptied since the mover's
        last pass: one pipelined round trip over the sets' work lists."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for index in range(self.sets):
                pipe.smembers(self._keys.delayed(index).queues)
            listed = await pipe.execute()
        return sorted(
            {Queue.from_key(_text(m)) for members in listed for m in members},
            key=lambda q: (q.tenant, q.name),
        )

    async def stats(self, queues: list[Queue]) -> list[QueueStats]:
        """Counts and the oldest due age of each queue: one read-only script per set and
        queue, pipelined in one round trip."""

        def build(pipe: Any) -> None:
            for queue in queues:
                for index in range(self.sets):
                    k, name = self._keys.delayed(index), queue.key
                    keys = [k.due(name), k.ready(name), k.reserved(name), k.due_v1(name)]
                    queue_script(pipe, self._scripts["dq_stats"], keys, [])

        raw = await pipelined(self._redis, build, self._scripts.values()) if queues else []
        found: list[QueueStats] = []
        for i, queue in enumerate(queues):
            rows = [[int(v) for v in r] for r in raw[i * self.sets : (i + 1) * self.sets]]
            oldest = [now - due for _d, _r, _f, due, now in rows if due >= 0]
            found.append(
                QueueStats(
                    queue,
                    delayed=sum(r[0] for r in rows),
                    ready=sum(r[1] for r in rows),
                    in_flight=sum(r[2] for r in rows),
                    oldest_age_ms=max(oldest) if oldest else None,
                )
            )
        return found

    async def ready_queues(self, name: str) -> list[Queue]:
        """The queues named `name`, any tenant, with a message ready in some set: two
        pipelined round trips, however many tenants there are."""
        sets = [self._keys.delayed(index) for index in range(self.sets)]
        async with self._redis.pipeline(transaction=False) as pipe:
            for k in sets:
                pipe.smembers(k.queues)
            listed = await pipe.execute()
        candidates = [
            (k, queue)
            for k, members in zip(sets, listed, strict=True)
            for queue in map(Queue.from_key, map(_text, members))
            if queue.name == name
        ]
        if not candidates:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for k, queue in candidates:
                pipe.zcard(k.ready(queue.key))
            sizes = await pipe.execute()
        ready = {queue for (_k, queue), size in zip(candidates, sizes, strict=True) if size}
        return sorted(ready, key=lambda q: q.tenant)

    async def peek(self, set_index: int, queue: Queue, count: int) -> list[float]:
        """Scores of the first `count` ready messages of one set (lower goes first)."""
        found = await self._redis.zrange(
            self._keys.delayed(set_index).ready(queue.key), 0, count - 1, withscores=True
        )
        return [float(pair[1]) for pair in found]

    async def reserve(
        self, set_index: int, queue: Queue, max_messages: int, max_score: float
    ) -> list[Reserved]:
        k, name = self._keys.delayed(set_index), queue.key
        keys = [k.ready(name), k.reserved(name), k.state, k.msg]
        args: list[str | int] = [max_messages, secrets.token_hex(6) + ".", repr(max_score)]
        raw = await self._scripts["dq_reserve"](keys=keys, args=args)
        return [
            Reserved(_text(raw[i]), raw[i + 1], _text(raw[i + 2]), float(raw[i + 3]))
            for i in range(0, len(raw), 4)
        ]

    async def finish(self, message_id: str, queue: Queue, action: str, receipt: str = "") -> int:
        """1 done, 0 wrong state, -1 unknown (in this queue), -2 reserved under another
        receipt (a stale one, or one never issued). A finished message keeps only its
        state in Redis (dq_finish.lua)."""
        k, name = self._set(message_id), queue.key
        keys = [k.due(name), k.ready(name), k.reserved(name), k.state, k.msg]
        args = [action, message_id, receipt, name]
        return int(await self._scripts["dq_finish"](keys=keys, args=args))

    async def forget(self, messages: Sequence[tuple[str, Queue]]) -> set[str]:
        """Remove what Redis keeps of these finished messages (id, queue): one script per
        set, pipelined in one round trip. Returns the ids it kept because Redis holds them
        unfinished in their queue (dq_forget.lua)."""
        by_set: dict[int, list[str]] = {}
        for message_id, queue in messages:
            index = self._keys.delayed_set(message_id, self.sets)
            by_set.setdefault(index, []).extend((message_id, queue.key))

        def build(pipe: Any) -> None:
            for index, args in by_set.items():
                k = self._keys.delayed(index)
                queue_script(pipe, self._scripts["dq_forget"], [k.state, k.msg], args)

        raw = await pipelined(self._redis, build, self._scripts.values()) if by_set else []
        return {_text(message_id) for kept in raw for message_id in kept}

    async def status(self, message_id: str, queue: Queue) -> str | None:
        """delayed, ready, reserved, consumed or cancelled; None when Redis has no record
        of it in this queue."""
        k, name = self._set(message_id), queue.key
        keys = [k.state, k.due(name), k.due_v1(name)]
        raw = await self._scripts["dq_status"](keys=keys, args=[message_id, name])
        return _text(raw) if raw else None

    async def exists(self, message_id: str) -> bool:
        return bool(await self._redis.hexists(self._set(message_id).state, message_id))
