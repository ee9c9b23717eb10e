"""Every Redis key and channel name notifyhub uses, in one place.

All keys of one user share the hash tag `{tenant/user}`, so each per-user Lua
script touches a single Cluster slot. Layout of one user's inbox:

    <p>u{T/U}:items   hash   id -> notification content JSON (shared fields); a thread's
                             record, activity ids and activities (`T:<thread key>`,
                             `I:<thread key>`, `a:<activity id>`: lua/common.lua)
    <p>u{T/U}:state   hash   id -> "read_at_ms|seen|category" (per-user state)
    <p>u{T/U}:time    zset   id, all scores 0: ULIDs sort lexically by creation time (a
                             moved copy's member is a sort key of when it moved, then its
                             id: lua/common.lua `sort_key`)
    <p>u{T/U}:exp     zset   id -> expires_at_ms (expiry index)
    <p>u{T/U}:cnt     hash   total / unread / unseen counters; epoch of the seq; pinned ids;
                             the user's views (definitions, versions, counters `v<k>`)
                             (lua/common.lua)
    <p>u{T/U}:seq     string the user's change sequence (INCR)
    <p>u{T/U}:log     zset   seq -> change entry JSON, the newest `change_log_max`
    <p>u{T/U}:ck      hash   collapse_key -> notification id
    <p>u{T/U}:prefs   hash   category -> "<inbox 0|1><push 0|1>" (cache of PostgreSQL)
    <p>u{T/U}:streams hash   process id -> the user's streams open in that process, as it
                             last reported them (store/presence.py); expires unless renewed
    <p>u{T/U}:pend    list   copies a big fan-out left pending ("<header>\n<content>"), made
                             real by the next script touching the inbox (lua/common.lua
                             place_pending); a hub older than this key would not place them, so
                             upgrade every hub before big fan-outs run on the new one

Global keys:

    <p>expiry         zset   "T/U" -> earliest expiry in that inbox (cleaner's index)
    <p>events         channel every process hears: revocations (store/doorbells.py)
    <p>events{i}      channel of doorbell shard i of `pubsub_shards`, messages "T/U seq"
                      for the users whose slot % pubsub_shards is i (sharded on a Cluster)
    <p>n{id}:rcpt     set    "T/U" members holding a copy of notification id
    <p>n{id}:trace    hash   its routing trace (store/traces/), expires
    <p>n{id}:fanout   hash   a deferred fan-out being placed after its 202 (store/fanouts.py):
                             the notification, the recipient index's scan cursor, users
                             placed, its holder's token and lease; gone once placed
    <p>fanouts        set    ids of the deferred fan-outs being placed (a directory of the
                             hashes above, for the processes that resume them)
    <p>idem:{T}:<sha> hash   Idempotency-Key record
    <p>lock:<name>    string token of the current holder
    <p>rl:key:{id}    hash   token bucket of one API key (tokens, ts)
    <p>rl:user:{T/U}  hash   token bucket of one user
    <p>producer:<name>:seen:<sha>  string  a producer row already notified (TTL = window)

Delayed queue, N sets (a message's set = crc32(id) % N), each under hash tag {i}. A
queue is one (tenant, name): <q> below is its key, `T/name`, or the bare name for
tenant "default" (neither part may hold a '/', so the two forms never collide; the bare
form is what layout 2, before queues had a tenant, wrote: its keys are tenant "default"'s
queues as they stand). The mover reads no state: only waiting ids are in pdue (cancel
takes them out with its state change) and their scores give the ready score. Upgrading
from layouts 1 and 2 needs no step (the hash and ready formats are unchanged); run one
version at a time, though: a layout 1 hub cancelling a message a newer hub queued leaves
it in pdue (only newer hubs' reserve drops such an id), and a layout 2 hub queues every
tenant's scheduled notifications in tenant "default"'s `notifyhub.scheduled` queue (they
are still published to their own tenant: the message carries it).

    <p>dq{i}:msg            hash  id -> message JSON (immutable; carries its tenant)
    <p>dq{i}:state          hash  id -> "status|receipt|offers"; id:p priority, id:t ttl_ms,
                                  id:q <q> (absent for layout 2 messages)
                                  (status "delayed": waiting; ready once out of pdue)
    <p>dq{i}:topics         set   <q> of queues with messages in this set (the mover's work
                                  list; it drops a queue it leaves empty, a push adds it
                                  back; layout 2 members are bare names: tenant "default")
    <p>dq{i}:pdue:<q>       zset  id -> due_ms * 10 + (9 - priority); only waiting ids
    <p>dq{i}:ready:<q>      zset  id -> (9 - priority) * 1e13 + due_ms
    <p>dq{i}:reserved:<q>   zset  id -> visibility deadline ms
    <p>dq{i}:due:<q>        zset  id -> due_ms: layout 1, converted by the mover as it runs
    <p>epoch          string set once per Redis dataset; missing = Redis lost its data
    <p>hubs           zset   process id -> ms of its last stream presence report
    <p>token-nbf      hash   "T/U" -> ms: the user's tokens issued at or before it are
                             refused (store/revocations.py; durable in PostgreSQL)
    <p>t{T/name}:users   set  a topic's users     (cache of PostgreSQL, version-guarded)
    <p>t{T/name}:groups  set  a topic's groups
    <p>t{T/name}:meta    hash version of the cached membership
"""

from __future__ import annotations

import zlib
from binascii import crc_hqx
from collections.abc import Sequence
from dataclasses import dataclass

SLOT_MASK = 16383
"""A key's Cluster slot is the CRC16 of its hash tag, masked to 16,384 slots."""
DOORBELL_SHARDS = 16384
"""Doorbell channels by default: one per slot (docs/scaling.md, "Doorbell fan-in")."""

INBOX_FIELDS = ("items", "state", "time", "exp", "cnt", "seq", "log", "ck", "prefs", "pend")


def _escape(part: str) -> str:
    if "%" not in part and "{" not in part and "}" not in part:
        return part
    return part.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def member(tenant: str, user: str) -> str:
    """The `T/U` form naming a user in global sets and Pub/Sub messages."""
    return f"{tenant}/{user}"


def split_member(value: str) -> tuple[str, str]:
    tenant, _, user = value.partition("/")
    return tenant, user


@dataclass(frozen=True, slots=True)
class InboxKeys:
    items: str
    state: str
    time: str
    exp: str
    cnt: str
    seq: str
    log: str
    ck: str
    prefs: str
    pend: str

    def all(self) -> list[str]:
        """In the order every inbox script expects them in KEYS."""
        return [getattr(self, name) for name in INBOX_FIELDS]


DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Queue:
    """A delayed queue: one queue name in one tenant."""

    tenant: str
    name: str

    @property
    def key(self) -> str:
        """The queue's part of its key names (see the module docstring)."""
        if "/" in self.tenant or "/" in self.name:
            raise ValueError("a delayed queue's tenant and name must not contain '/'")
        return self.name if self.tenant == DEFAULT_TENANT else f"{self.tenant}/{self.name}"

    @classmethod
    def from_key(cls, key: str) -> Queue:
        tenant, slash, name = key.partition("/")
        return cls(tenant, name) if slash else cls(DEFAULT_TENANT, key)


@dataclass(frozen=True, slots=True)
class DelayedKeys:
    """One delayed set's keys; all share the set's hash tag. `queue` is a `Queue.key`."""

    base: str

    @property
    def state(self) -> str:
        return self.base + "state"

    @property
    def msg(self) -> str:
        return self.base + "msg"

    @property
    def queues(self) -> str:
        """Names of the queues with messages in this set (the key kept layout 2's name)."""
        return self.base + "topics"

    def due(self, queue: str) -> str:
        """Ids still delayed, scored due_ms * 10 + (9 - priority)."""
        return f"{self.base}pdue:{queue}"

    def due_v1(self, queue: str) -> str:
        """Layout 1's due zset (due_ms scores), drained into `due` by the mover."""
        return f"{self.base}due:{queue}"

    def ready(self, queue: str) -> str:
        return f"{self.base}ready:{queue}"

    def reserved(self, queue: str) -> str:
        return f"{self.base}reserved:{queue}"


class Keys:
    """Key names under one prefix (tests use a prefix per run)."""

    def __init__(self, prefix: str, *, pubsub_shards: int = DOORBELL_SHARDS) -> None:
        if "{" in prefix or "}" in prefix:
            raise ValueError("the Redis key prefix must not contain braces (Cluster hash tags)")
        self.prefix = prefix
        self.pubsub_shards = pubsub_shards
        self.channel = f"{prefix}events"
        self.expiry = f"{prefix}expiry"
        self.epoch = f"{prefix}epoch"
        self.hubs = f"{prefix}hubs"
        self.token_nbf = f"{prefix}token-nbf"
        self.fanouts = f"{prefix}fanouts"

    def shard_channel(self, index: int) -> str:
        """Doorbell shard `index`'s channel, its own hash tag so the shards spread over slots."""
        return f"{self.channel}{{{index}}}"

    def doorbell_shard(self, member: str) -> int:
        """The doorbell shard of user `T/U`: the Cluster slot of their keys' hash tag, modulo
        `pubsub_shards` (the users of one slot share a shard, on any Redis)."""
        return (crc_hqx(_escape(member).encode(), 0) & SLOT_MASK) % self.pubsub_shards

    def inbox(self, tenant: str, user: str) -> InboxKeys:
        return InboxKeys(*self.inbox_list(tenant, user))

    def _user_head(self, member: str) -> str:
        """What every key of user `T/U` starts with ('/' is not escaped)."""
        return f"{self.prefix}u{{{_escape(member)}}}:"

    def inbox_list(self, tenant: str, user: str) -> list[str]:
        """The user's keys in INBOX_FIELDS order (the scripts' KEYS layout), built cheaply."""
        head = self._user_head(f"{tenant}/{user}")
        return [head + name for name in INBOX_FIELDS]

    def user_keys(self, members: Sequence[str], fields: Sequence[str]) -> list[str]:
        """The `fields` keys of each user (`T/U`, see `member`), user after user: the KEYS
        of a batch script. Built in bulk, as a 100k fan-out needs them."""
        heads = [self._user_head(m) for m in members]
        if len(fields) == 1:
            return [head + fields[0] for head in heads]
        return [head + field for head in heads for field in fields]

    def streams(self, member: str) -> str:
        """User `T/U`'s open streams per process (store/presence.py)."""
        return self._user_head(member) + "streams"

    def topic(self, tenant: str, name: str) -> tuple[str, str, str]:
        """(users, groups, meta) keys of a topic's cache, one hash tag per topic."""
        base = f"{self.prefix}t{{{_escape(tenant)}/{_escape(name)}}}:"
        return base + "users", base + "groups", base + "meta"

    def recipients(self, notification_id: str) -> str:
        return f"{self.prefix}n{{{notification_id}}}:rcpt"

    def fanout(self, notification_id: str) -> str:
        """A deferred fan-out's placement record (the recipient index's slot)."""
        return f"{self.prefix}n{{{notification_id}}}:fanout"

    def routing_trace(self, notification_id: str) -> str:
        return f"{self.prefix}n{{{notification_id}}}:trace"

    def idempotency(self, tenant: str, key_sha: str) -> str:
        return f"{self.prefix}idem:{{{_escape(tenant)}}}:{key_sha}"

    def delayed_set(self, message_id: str, sets: int) -> int:
        """Which of the N delayed sets holds a message: a stable hash of its id."""
        return zlib.crc32(message_id.encode()) % sets

    def delayed(self, index: int) -> DelayedKeys:
        base = f"{self.prefix}dq{{{index}}}:"
        return DelayedKeys(base)

    def producer_seen(self, producer: str, digest: str) -> str:
        """A producer's dedupe mark for one row (expires with the dedupe window)."""
        return f"{self.prefix}producer:{producer}:seen:{digest}"

    def lock(self, name: str) -> str:
        return f"{self.prefix}lock:{name}"

    def rate_limit(self, kind: str, name: str) -> str:
        """The token bucket of one API key (`kind` "key") or user ("user", `T/U`)."""
        return f"{self.prefix}rl:{kind}:{{{_escape(name)}}}"
