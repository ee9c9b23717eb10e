"""What a routing trace holds (routes, outcomes, lines) and how its hash lays them out."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from notifyhub.domain.notification import Recipients

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


DELIVERED, PENDING, ALREADY_HELD, DROPPED = (
    Outcome.DELIVERED.value,
    Outcome.PENDING.value,
    Outcome.ALREADY_HELD.value,
    Outcome.DROPPED_BY_PREFERENCE.value,
)
"""The outcomes' values (`outcome_of`)."""


def outcome_of(seq: int, placed: str) -> str:
    """What `InboxStore.place` answered for one user (their seq), as an outcome's value;
    `placed`: a new copy's (`delivered`, i.e. placed, or pending in a deferred fan-out).
    Values, not `Outcome` members: a member's `.value` is a property call, on every
    recipient."""
    if seq > 0:
        return placed
    return ALREADY_HELD if seq == 0 else DROPPED


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
    channels: tuple[tuple[str, str], ...] = ()
    """Beyond the inbox: (channel, what came of it) pairs, as the channel worker noted
    them (`e-mailed`, `pushed to 2 browsers`, `skipped: no address`...)."""


@dataclass(frozen=True, slots=True)
class RoutingTrace:
    r"""One notification's trace as read back. Stored as a hash `<p>n{id}:trace` beside
    the notification's recipient index (store/keys.py `routing_trace`), with the fields

        meta      JSON: tenant, created/expires, who was named, outcomes
        b:<k>     JSON: the lines of the recorded users whose id's CRC-32 is k modulo
                  BUCKETS, as {"<source>\t<outcome>": {user: seq (0 unless placed)}},
                  and under "x" what a copy pushed out: {user: {replaced, evicted}}
        recalled  ms of the recall, if any
        s:<user>  how many live streams were sent the user's copy's event, in every
                  hub process (HINCRBY; recorded users only; absent: none)
        c:<user>  JSON {channel: outcome} beyond the inbox, by the channel worker
                  (workers/channels.py; recorded users only)

    Lines go in BUCKETS fields, grouped by (source, outcome), rather than a field or a
    JSON object per user, so a big fan-out packs a few fields and a line is one dict
    entry; reading one user's line parses their bucket."""

    meta: dict[str, Any]
    lines: list[TraceLine]
    recalled_ms: int | None


BUCKETS = 64
"""Fields the lines of one trace are spread over."""


def bucket_of(user: str) -> str:
    """The field holding `user`'s line (`b:<k>`, k their id's CRC-32 modulo BUCKETS)."""
    return f"b:{zlib.crc32(user.encode()) % BUCKETS}"


def counted(seqs: list[int]) -> dict[str, int]:
    """How many recipients of a placement had each outcome (`outcome_of` of every seq,
    counted in C: a 100k fan-out's trace spent most of its time in a Python loop over the
    seqs), by outcome value."""
    dropped, held = seqs.count(-1), seqs.count(0)
    return {
        DELIVERED: len(seqs) - dropped - held,
        PENDING: 0,
        ALREADY_HELD: held,
        DROPPED: dropped,
    }


def all_pending(users: int) -> dict[str, int]:
    """The outcomes of a deferred fan-out at its publish: every user pending until their
    batch is placed (trace_dropped.lua moves those their preferences drop)."""
    return {DELIVERED: 0, PENDING: users, ALREADY_HELD: 0, DROPPED: 0}


PUSHED_OUT = "x"
"""A bucket's entry of what copies pushed out, by user."""

STREAMED = "s:"
"""Prefix of a trace's fields counting, per user, the streams sent the copy's event."""

CHANNELS = "c:"
"""Prefix of a trace's fields holding, per user, the outcomes beyond the inbox."""

ESCALATED = "e:"
"""Prefix of a trace's fields holding one escalation step's outcome: `e:<user>\t<step>`
(shown among the user's channel outcomes as `escalate <step>`)."""


def escalation_field(user: str, step: int) -> str:
    return f"{ESCALATED}{user}\t{step}"


def merge_escalations(
    channels: dict[str, dict[str, str]], found: dict[bytes, bytes]
) -> dict[str, dict[str, str]]:
    """`channels` with the escalation steps' outcomes among `found` trace fields."""
    prefix = ESCALATED.encode()
    for name, raw in found.items():
        if name.startswith(prefix):
            user, _, step = name[len(prefix) :].decode().rpartition("\t")
            channels.setdefault(user, {})[f"escalate {step}"] = raw.decode()
    return channels


def lines_of(
    bucket: dict[str, dict[str, Any]],
    streamed: dict[str, int],
    channels: dict[str, dict[str, str]] | None = None,
) -> Iterator[TraceLine]:
    """The lines of one bucket, with what each copy pushed out, the streams counted and
    the outcomes beyond the inbox."""
    channels = channels or {}
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
                tuple(sorted(channels.get(user, {}).items())),
            )


def lined_users(bucket: dict[str, dict[str, Any]]) -> Iterator[str]:
    """The users with a line in one bucket."""
    for kind, users in bucket.items():
        if kind != PUSHED_OUT:
            yield from users
