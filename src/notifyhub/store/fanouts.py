"""The placement records of deferred fan-outs placed after their 202 (services/fanouts.py).

A fan-out to `limits.defer_fanout_at` users or more answers once its recipient index is
written and its streams are told; its pending copies are written after, in paced batches
that walk the recipient index with SSCAN. Its record, `n{id}:fanout` (the index's slot),
holds what a batch needs and where the walk stands, so that any process can finish it
when the one placing it dies:

    n        the notification (JSON)          pull, trace   how its copies are made
    cursor   the index's SSCAN cursor the next batch starts at ("0" before the first)
    users    recipients in all                placed        users whose batch is written
    token    its holder's                     lease         ms (Redis' clock) it is held until

A batch moves the cursor in the same script as its pushes, checking the holder's token and
the cursor it started at (lua/defer.lua); on a Cluster (the users' slots are not the
record's) right after them (`advance`), so a holder that dies between the two has that one
batch placed again by the next (`place_pending` keeps one copy of an id a user holds).
The index does not change while its fan-out is placed (its writer wrote it whole before
the record; a recall deletes both), so SSCAN returns each user once.

`<p>fanouts` lists the records' ids: each process looks there for records whose lease has
run out (`claim`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from notifyhub.domain.notification import Notification
from notifyhub.store.keys import Keys

_CLAIM = """
local f = redis.call('HMGET', KEYS[1], 'lease', 'n', 'pull', 'trace', 'cursor')
if not f[2] then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(f[1]) > now then return 0 end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'lease', now + tonumber(ARGV[2]))
return {f[2], f[3], f[4], f[5]}
"""
"""Take record KEYS[1] over when its lease has run out: a new token and lease, and
(notification, pull, trace, cursor); 0 while it is held, nil when it is gone."""

_ADVANCE = """
local held = redis.call('HMGET', KEYS[1], 'token', 'cursor')
if held[1] ~= ARGV[1] or held[2] ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'cursor', ARGV[3], 'lease', now + tonumber(ARGV[5]))
redis.call('HINCRBY', KEYS[1], 'placed', ARGV[4])
return 1
"""
"""A Cluster batch written: move record KEYS[1] from cursor ARGV[2] to ARGV[3], ARGV[4]
more users placed, while token ARGV[1] holds it (1; else 0, nothing changed)."""

_FINISH = """
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
"""Delete record KEYS[1] while token ARGV[1] holds it (its last batch written)."""


@dataclass(frozen=True, slots=True)
class FanoutStep:
    """One batch of a fan-out's placement, for the script that writes it (lua/defer.lua):
    the record, its holder's token, the cursor the batch starts at and the one it ends at,
    and the lease the write renews."""

    record: str
    token: str
    start: str
    end: str
    lease_ms: int

    def args(self) -> list[str | int]:
        return [self.token, self.start, self.end, self.lease_ms]


@dataclass(slots=True)
class Fanout:
    """A deferred fan-out as its holder places it."""

    notification: Notification
    pull: bool
    trace: bytes | None
    cursor: str
    token: str


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a fan-out's placement has come."""

    users: int
    placed: int


def lost(exc: ResponseError) -> bool:
    """Whether a batch's error reply says its record is no longer the writer's
    (lua/defer.lua `NOTHELD`)."""
    return str(exc).startswith("NOTHELD")


class FanoutRecords:
    """The placement records and their directory (see the module's text)."""

    def __init__(self, redis: Redis, keys: Keys, *, lease_ms: int) -> None:
        self._redis = redis
        self._keys = keys
        self.lease_ms = lease_ms
        self._claim = redis.register_script(_CLAIM)
        self._advance = redis.register_script(_ADVANCE)
        self._finish = redis.register_script(_FINISH)

    def record(self, notification_id: str) -> str:
        return self._keys.fanout(notification_id)

    async def create(
        self,
        notification: Notification,
        users: int,
        *,
        pull: bool,
        trace: bytes | None,
    ) -> Fanout:
        """The record of a fan-out about to be placed by this process (held for a lease),
        listed for the others. A publish retried with its Idempotency-Key after a crash
        finds its record: it takes it over where it stands. The record expires with the
        notification: past that, nothing of it is left to place."""
        token = secrets.token_hex(8)
        record = self.record(notification.id)
        fields: dict[str, str | bytes | int] = {
            "n": notification.model_dump_json(),
            "pull": int(pull),
            "trace": trace or b"",
            "cursor": "0",
            "users": users,
            "placed": 0,
        }
        lease = await self._now_ms() + self.lease_ms
        await self._redis.sadd(self._keys.fanouts, notification.id)  # first: a record
        # without its entry would never be resumed; an entry without a record leaves
        async with self._redis.pipeline(transaction=True) as pipe:
            for name, value in fields.items():
                pipe.hsetnx(record, name, value)
            pipe.hset(record, mapping={"token": token, "lease": lease})
            pipe.expireat(record, int(notification.expires_at.timestamp()) + 1)
            pipe.hget(record, "cursor")  # a retry's: as the first wrote it
            cursor = (await pipe.execute())[-1]
        return Fanout(notification, pull, trace, _text(cursor), token)

    async def listed(self) -> list[str]:
        """The ids of the fan-outs being placed, by any process."""
        return [_text(m) for m in await self._redis.smembers(self._keys.fanouts)]

    async def claim(self, notification_id: str) -> Fanout | None:
        """Take over a fan-out whose holder's lease ran out (None while held, or when it
        is gone: then it leaves the directory)."""
        token = secrets.token_hex(8)
        record = self.record(notification_id)
        reply = await self._claim(keys=[record], args=[token, self.lease_ms])
        if reply is None:
            await self._redis.srem(self._keys.fanouts, notification_id)
            return None
        if not isinstance(reply, list):
            return None
        raw, pull, trace, cursor = reply
        notification = Notification.model_validate_json(raw)
        traced = trace.encode() if isinstance(trace, str) else trace
        pulled = _text(pull) == "1"
        return Fanout(notification, pulled, traced or None, _text(cursor), token)

    async def scan(self, notification_id: str, cursor: str, count: int) -> tuple[str, list[str]]:
        """The next users (`T/U`) of the fan-out's recipient index from `cursor`, and the
        cursor after them ("0": the last)."""
        after, members = await self._redis.sscan(
            self._keys.recipients(notification_id), int(cursor), count=count
        )
        return str(after), [_text(m) for m in members]

    def step(self, fanout: Fanout, end: str) -> FanoutStep:
        """The next batch of `fanout`, from its cursor to `end`."""
        record = self.record(fanout.notification.id)
        return FanoutStep(record, fanout.token, fanout.cursor, end, self.lease_ms)

    async def advance(self, step: FanoutStep, placed: int) -> bool:
        """On a Cluster, a batch written: the record moved on (False: another holder has
        it, or it was recalled)."""
        args: list[str | int] = [step.token, step.start, step.end, placed, step.lease_ms]
        return bool(await self._advance(keys=[step.record], args=args))

    async def finish(self, fanout: Fanout) -> None:
        """The last batch written: the record goes, then its directory entry (while this
        holder has it: a holder that lost it leaves both to the one that took it)."""
        nid = fanout.notification.id
        if await self._finish(keys=[self.record(nid)], args=[fanout.token]):
            await self._redis.srem(self._keys.fanouts, nid)

    async def cancel(self, notification_id: str) -> None:
        """A recall: the record goes whoever holds it; its next batch writes nothing."""
        await self._redis.delete(self.record(notification_id))
        await self._redis.srem(self._keys.fanouts, notification_id)

    async def progress(self, notification_id: str) -> Progress | None:
        """The fan-out's progress; None once placed (or never deferred)."""
        record = self.record(notification_id)
        users, placed = await self._redis.hmget(record, ["users", "placed"])
        if users is None:
            return None
        return Progress(int(users), int(placed or 0))

    async def _now_ms(self) -> int:
        seconds, micros = await self._redis.time()
        return int(seconds) * 1000 + int(micros) // 1000


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
