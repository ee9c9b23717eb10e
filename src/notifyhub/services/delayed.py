"""The delayed queue (Design 5, docs/origins.md): PostgreSQL is the log, Redis does the timing.

A queue is one (tenant, name): every message belongs to one tenant, and every lookup by
id names the tenant asking (another tenant's id answers exactly like a missing one).
A push is committed to PostgreSQL before it is acknowledged, then queued in Redis (the
caller's unit of work queues it after its commit).
Status changes made by the mover and consumers are appended to the transition log in
batches; acks and cancels also update the message row at once, so a restore after
Redis lost its data re-queues exactly what was not consumed or cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain, repeat
from typing import Literal, get_args

import orjson
from pydantic import JsonValue
from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from notifyhub import deadline as request_deadline
from notifyhub.db.models import DelayedMessage
from notifyhub.db.repositories import delayed as repo
from notifyhub.db.repositories.delayed import FINISHED
from notifyhub.db.unit import UnitOfWork, Units
from notifyhub.domain.notification import from_ms, to_ms, to_rfc3339
from notifyhub.errors import Conflict, InvalidInput, NotFound
from notifyhub.store.delayed import DelayedStore, Moved, QueueStats
from notifyhub.store.keys import Queue
from notifyhub.tracing import Attributes, Tracing

log = logging.getLogger(__name__)

HOST = socket.gethostname()
RESERVED_PREFIX = "notifyhub."
"""The hub's internal queues (scheduled notifications, snooze ends) are named so."""
POLL_S = 0.02
BURST_HOLD_S = 0.2
"""How long a full mover batch holds the transition log's flushes back."""


@dataclass(frozen=True, slots=True)
class NewMessage:
    tenant: str
    queue: str
    body: JsonValue
    due_ms: int
    priority: int = 0
    ttl_ms: int = 30_000
    biz_key: str | None = None
    id: str | None = None


Status = Literal["delayed", "ready", "reserved", "consumed", "cancelled"]
STATUSES: frozenset[str] = frozenset(get_args(Status))


def _status(value: str) -> Status:
    if value not in STATUSES:
        raise ValueError(f"unknown delayed-message status {value!r}")
    return value  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class MessageInfo:
    """A delayed message as its consumers see it."""

    id: str
    tenant: str
    queue: str
    body: JsonValue
    priority: int
    ttl_ms: int
    biz_key: str | None
    due_at: datetime

    @classmethod
    def of(cls, row: DelayedMessage) -> MessageInfo:
        return cls(
            row.id,
            row.tenant,
            row.queue,
            row.body,
            row.priority,
            row.ttl_ms,
            row.biz_key,
            row.due_at,
        )


@dataclass(frozen=True, slots=True)
class MessageState:
    """A message and its status now (Redis' when it holds the message, else the row's)."""

    message: MessageInfo
    status: Status


@dataclass(frozen=True, slots=True)
class Reserved:
    """A message a consumer took, with the receipt its ack must present."""

    message: MessageInfo
    receipt: str


_Run = tuple[Sequence[str], str, int | None, str | None]
"""Ids that took one status in one set by one worker."""


@dataclass(frozen=True, slots=True)
class Transition:
    message_id: str
    status: str
    set_index: int | None = None
    worker: str | None = None


class TransitionLog:
    """Buffers transitions and writes them in one COPY per flush (a runner loop).

    The buffer holds runs of ids sharing a status, set and worker (a mover batch is one
    run), so logging a burst costs one append per batch, not an object per id. While the
    mover is moving a burst it holds the loop's flushes back (a COPY of its rows costs
    PostgreSQL about as much CPU as the move costs Redis), up to `max_hold_s` after the
    oldest buffered entry or until half the buffer is used; `flush()` itself never waits.
    Beyond `max_buffer` entries (PostgreSQL down for long) new entries are dropped, loudly.

    The log writes its own transactions: a flush is a batch of its own, retried whole,
    so it cannot join a caller's.
    """

    def __init__(
        self,
        units: Units,
        max_buffer: int = 500_000,
        max_hold_s: float = 2.0,
    ) -> None:
        self._units = units
        self._runs: list[_Run] = []
        self._size = 0
        self._max = max_buffer
        self._max_hold_s = max_hold_s
        self._held_until = 0.0
        self._oldest_at = 0.0

    def add(self, transitions: Sequence[Transition]) -> None:
        for t in transitions:
            self.add_ids([t.message_id], t.status, t.set_index, t.worker)

    def add_ids(
        self, ids: Sequence[str], status: str, set_index: int | None, worker: str | None
    ) -> None:
        if not ids:
            return
        if self._size + len(ids) > self._max:
            log.warning("transition log buffer full: dropping %d entries", len(ids))
            return
        if not self._runs:
            self._oldest_at = time.monotonic()
        self._runs.append((ids, status, set_index, worker))
        self._size += len(ids)

    def hold(self, seconds: float) -> None:
        """Let `flush_unless_held` wait `seconds` from now (within its limits)."""
        self._held_until = max(self._held_until, time.monotonic() + seconds)

    async def flush_unless_held(self) -> int:
        now = time.monotonic()
        held = (
            now < self._held_until
            and now - self._oldest_at < self._max_hold_s
            and self._size < self._max // 2
        )
        return 0 if held else await self.flush()

    async def flush(self) -> int:
        runs, size, oldest_at = self._runs, self._size, self._oldest_at
        if not runs:
            return 0
        self._runs, self._size = [], 0
        rows = chain.from_iterable(
            zip(ids, repeat(status), repeat(index), repeat(worker), repeat(HOST))
            for ids, status, index, worker in runs
        )
        try:
            async with self._units() as unit:
                session = unit.session
                await repo.copy_transitions(session, rows)
        except Exception:
            self._runs[:0] = runs  # keep them for the next flush
            self._size += size
            self._oldest_at = oldest_at
            raise
        return size


def payload(row: DelayedMessage) -> bytes:
    """The message as Redis holds it and `_reserved` reads it back."""
    return orjson.dumps(
        {
            "id": row.id,
            "tenant": row.tenant,
            "topic": row.queue,  # the stored JSON keeps its field name
            "body": row.body,
            "priority": row.priority,
            "ttl_ms": row.ttl_ms,
            "biz_key": row.biz_key,
            "due_at": to_rfc3339(row.due_at),
        }
    )


def _reserved(queue: Queue, stored: bytes | str, receipt: str) -> Reserved:
    """A message read back from Redis; one queued by a hub before queues had a tenant
    names none (it was queued in its tenant's queue, or "default"'s)."""
    fields = orjson.loads(stored)
    message = MessageInfo(
        fields["id"],
        fields.get("tenant", queue.tenant),
        fields["topic"],  # the queue's name
        fields["body"],
        fields["priority"],
        fields["ttl_ms"],
        fields.get("biz_key"),
        datetime.fromisoformat(fields["due_at"]),
    )
    return Reserved(message, receipt)


class DelayedService:
    """Every method that reads or writes PostgreSQL runs in the caller's session; those
    whose Redis step or transition entry must follow the commit take its unit of work."""

    def __init__(
        self,
        store: DelayedStore,
        log_: TransitionLog,
        *,
        on_queued: Callable[[int], None] | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self._store = store
        self._tracing = tracing or Tracing()
        self.transitions = log_
        self.on_queued = on_queued or (lambda due_ms: None)
        """Told the due time (epoch ms) of what this process queued: wakes its mover."""

    async def push(self, unit: UnitOfWork, new: NewMessage) -> tuple[str, datetime]:
        """Durable in PostgreSQL first, then queued in Redis once `unit` commits; tracing
        on, a `notifyhub.delayed.push` span."""
        if not self._tracing.enabled:
            return await self._push(unit, new)
        attributes: Attributes = {"notifyhub.tenant": new.tenant, "notifyhub.queue": new.queue}
        with self._tracing.span("notifyhub.delayed.push", attributes, kind="producer") as span:
            message_id, due_at = await self._push(unit, new)
            span.set_attribute("notifyhub.message.id", message_id)
        return message_id, due_at

    async def _push(self, unit: UnitOfWork, new: NewMessage) -> tuple[str, datetime]:
        message_id = new.id or str(ULID())
        row = DelayedMessage(
            id=message_id,
            tenant=new.tenant,
            queue=new.queue,
            body=new.body,
            priority=new.priority,
            ttl_ms=new.ttl_ms,
            biz_key=new.biz_key,
            due_at=from_ms(new.due_ms),
            status="delayed",
        )
        await repo.add(unit.session, row)

        async def queue() -> None:
            await self._queue(row)
            self.transitions.add([Transition(message_id, "delayed")])

        unit.after_commit(queue)
        return message_id, row.due_at

    async def _queue(self, row: DelayedMessage) -> bool:
        queued = bool(await self._store.push_many([_entry(row)]))
        self.on_queued(to_ms(row.due_at))
        return queued

    async def get(self, session: AsyncSession, tenant: str, message_id: str) -> MessageState:
        row = await self._row(session, tenant, message_id)
        status = await self._store.status(message_id, _queue_of(row)) or row.status
        return MessageState(MessageInfo.of(row), _status(status))

    async def cancel(self, unit: UnitOfWork, tenant: str, message_id: str) -> None:
        row = await self._row(unit.session, tenant, message_id)
        queue = _queue_of(row)
        result = await self._store.finish(message_id, queue, "cancel")
        if result == -1:  # Redis lost it: PostgreSQL decides
            if row.status in FINISHED:
                raise Conflict(f"the message is already {row.status}")
            await self._queue(row)
            result = await self._store.finish(message_id, queue, "cancel")
        if result != 1:
            raise Conflict("the message is already reserved, consumed or cancelled")
        await self._finish(unit, message_id, "cancelled")

    async def discard(
        self, session: AsyncSession, rows: Sequence[DelayedMessage], *, keep: str | None = None
    ) -> int:
        """Remove whole, from Redis and their rows (in `session`, which read them), the waiting
        messages among `rows` but `keep`: messages made moot before their time (a
        snooze's wake-up once the snooze changed), which would otherwise stay rows for
        good. One a consumer holds is left to its ack. Returns how many went."""
        gone = []
        for row in rows:
            if row.id == keep:
                continue
            # -1: Redis lost it (a restore would bring back a row left behind)
            if await self._store.finish(row.id, _queue_of(row), "drop") in (1, -1):
                gone.append(row.id)
        await repo.remove(session, gone, unfinished_too=True)
        return len(gone)

    async def ack(self, unit: UnitOfWork, queue: Queue, message_id: str, receipt: str) -> None:
        """Ack a message `queue` offered; an id of another queue is unknown (404). A receipt
        that is not the current reservation's (stale, or never issued: Redis keeps only
        the current one, so the two look alike) is a 409 that shows neither."""
        result = await self._store.finish(message_id, queue, "ack", receipt)
        if result == -1:
            raise NotFound(f"no delayed message {message_id}")
        if result == -2:  # reserved under another receipt: a newer one, or none we issued
            raise Conflict(
                "no such receipt: not this message's current reservation (a receipt no longer "
                "counts once the message is offered again after its ttl_ms)"
            )
        if result == 0:
            raise Conflict("the message is not reserved")
        await self._finish(unit, message_id, "consumed")

    async def consume(self, queue: Queue, wait_s: int, max_messages: int) -> list[Reserved]:
        """Long-poll one queue: return as soon as something is ready, or [] after `wait_s`."""
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            request_deadline.renew()  # each round's Redis calls get the request's budget
            started_ns = time.time_ns() if self._tracing.enabled else 0
            found = await self._reserve(queue, max_messages)
            if found and self._tracing.enabled:  # the reads that found nothing: no span
                self._trace_consume(queue, found, started_ns)
            if found or asyncio.get_running_loop().time() >= deadline:
                return found
            await asyncio.sleep(POLL_S)

    def _trace_consume(self, queue: Queue, found: list[Reserved], started_ns: int) -> None:
        attributes: Attributes = {
            "notifyhub.tenant": queue.tenant,
            "notifyhub.queue": queue.name,
            "notifyhub.messages": len(found),
        }
        self._tracing.record("notifyhub.delayed.consume", started_ns, attributes)

    async def ready_queues(self, name: str) -> list[Queue]:
        """Every tenant's queue named `name` with a message ready now."""
        return await self._store.ready_queues(name)

    async def queue_stats(
        self, tenant: str, after: str | None, limit: int, *, internal: bool = False
    ) -> tuple[list[QueueStats], str | None]:
        """`tenant`'s queues by name after `after` (those holding a message in Redis; one
        emptied stays until the mover's next pass), with their counts; and the next page's
        cursor (None: the last page). The hub's internal queues (`notifyhub.*`) only with
        `internal`."""
        names = [
            q
            for q in await self._store.all_queues()
            if q.tenant == tenant and (internal or not q.name.startswith(RESERVED_PREFIX))
        ]
        after_cursor = [q for q in names if after is None or q.name > after]
        shown = after_cursor[:limit]
        more = len(after_cursor) > limit
        return await self._store.stats(shown), shown[-1].name if more else None

    async def _reserve(self, queue: Queue, max_messages: int) -> list[Reserved]:
        """The best `max_messages` across every set, by priority then due time: peek each
        set's head, choose the global top N, reserve exactly that many from each set."""
        peeked = [
            (score, index)
            for index in range(self._store.sets)
            for score in await self._store.peek(index, queue, max_messages)
        ]
        chosen = sorted(peeked)[:max_messages]
        if not chosen:
            return []
        per_set = Counter(index for _score, index in chosen)
        bound = chosen[-1][0]
        reserved: list[tuple[float, Reserved]] = []
        for index, count in sorted(per_set.items()):
            got = await self._store.reserve(index, queue, count, bound)
            self.transitions.add_ids([r.id for r in got], "reserved", index, "consumer")
            reserved += [(r.score, _reserved(queue, r.message, r.receipt)) for r in got]
        reserved.sort(key=lambda pair: pair[0])
        return [message for _score, message in reserved]

    async def move(self, limit: int = 1000, max_batches: int = 50) -> list[Moved]:
        """One mover pass over every set and queue (idempotent; any number may run).

        A (set, queue) whose batch came back full is moved again at once, up to
        `max_batches`, so a burst due in the same second does not wait for later ticks."""
        per_set = await asyncio.gather(
            *(self._move_set(index, limit, max_batches) for index in range(self._store.sets))
        )
        return [moved for results in per_set for moved in results]

    async def _move_set(self, index: int, limit: int, max_batches: int) -> list[Moved]:
        """The sets are independent: moving them concurrently overlaps round trips."""
        results = []
        for queue in await self._store.queues(index):
            for _ in range(max_batches):
                moved = await self._store.move(index, queue, limit)
                self._log_moves(moved)
                results.append(moved)
                if len(moved.moved) < limit:
                    break
                self.transitions.hold(BURST_HOLD_S)  # a burst: log it once it is moved
        return results

    def _log_moves(self, moved: Moved) -> None:
        self.transitions.add_ids(moved.moved, "ready", moved.set_index, "mover")
        self.transitions.add_ids(moved.reoffered, "ready", moved.set_index, "reaper")

    async def restore(
        self, session: AsyncSession, *, expired: bool, tenant: str | None = None
    ) -> int:
        """Re-queue from PostgreSQL, each into its own tenant's queue, what is not consumed
        or cancelled (and not in Redis), due or not: one tenant's, or every tenant's (None).
        What the log last shows reserved only with `expired`. Only reads: Redis is written
        as the rows stream in."""
        return await self._requeue(repo.unfinished(session, tenant=tenant, expired=expired))

    async def restore_one(self, session: AsyncSession, tenant: str, message_id: str) -> int:
        """Re-queue one message of `tenant` (expired or not); 404 when it is another
        tenant's, or finished and not in Redis."""
        await self._row(session, tenant, message_id)
        restored = await self._requeue(repo.unfinished(session, message_id=message_id))
        if restored == 0 and not await self._store.exists(message_id):
            raise NotFound(f"no restorable delayed message {message_id}")
        return restored

    async def forget_finished(self, session: AsyncSession, age_s: float, limit: int) -> int:
        """Remove up to `limit` messages of any tenant finished more than `age_s` ago,
        oldest first; how many went. Each is removed from its own (tenant, queue) in Redis
        first, while its row is locked in `session`, then its row and transitions: a
        crash between the two leaves the row, and the next pass finishes the job (nothing
        left in Redis that no row would ever remove). A push naming a removed id is then
        a new message. One Redis holds unfinished (it lost the finish) is kept and its
        retention counted again from now, so it never blocks the passes behind it."""
        rows = await repo.finished_before(session, age_s, limit)
        kept = await self._store.forget([(row.id, Queue(row.tenant, row.queue)) for row in rows])
        if kept:
            log.warning(
                "delayed retention: %d finished messages are unfinished in Redis", len(kept)
            )
            await repo.postpone(session, sorted(kept))
        return await repo.remove(session, [row.id for row in rows if row.id not in kept])

    async def _requeue(self, batches: AsyncIterator[Sequence[DelayedMessage]]) -> int:
        restored = 0
        async for batch in batches:
            restored += await self._store.push_many([_entry(row) for row in batch])
            self.on_queued(min(to_ms(row.due_at) for row in batch))
        return restored

    @staticmethod
    async def _row(session: AsyncSession, tenant: str, message_id: str) -> DelayedMessage:
        """The message, if it is `tenant`'s: another tenant's is as missing as no message."""
        row = await repo.find(session, message_id)
        if row is None or row.tenant != tenant:
            raise NotFound(f"no delayed message {message_id}")
        return row

    async def _finish(self, unit: UnitOfWork, message_id: str, status: str) -> None:
        """The row's status now, its transition logged once that commits."""
        await repo.finish(unit.session, message_id, status)

        async def log_transition() -> None:
            self.transitions.add([Transition(message_id, status)])

        unit.after_commit(log_transition)


def _queue_of(row: DelayedMessage) -> Queue:
    return Queue(row.tenant, row.queue)


def _entry(row: DelayedMessage) -> tuple[str, Queue, bytes, int, int, int]:
    return row.id, _queue_of(row), payload(row), to_ms(row.due_at), row.priority, row.ttl_ms


def due_ms_from(delay_ms: int | None, due_at: datetime | None) -> int:
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    if due_at is not None:
        return to_ms(due_at)
    if delay_ms is not None:
        return now_ms + delay_ms
    raise InvalidInput("give `delay_ms` or `due_at`")
