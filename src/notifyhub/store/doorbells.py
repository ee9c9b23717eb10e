"""Where a user's change doorbell is rung: their shard's channel, heard by the processes
holding a stream of a user of that shard (issue 38: not every process hears every bell).

    standalone / Sentinel   PUBLISH  <p>events{i}   i = the user's Cluster slot % shards
    Redis Cluster           SPUBLISH <p>events{i}   (Keys.doorbell_shard)
    every process           (S)SUBSCRIBEs <p>events (revocations, broadcasts), and
                            <p>events{i} while it holds a stream of a user of shard i
                            (realtime/hub.py)

A batch of users spanning several shards is one message per shard touched, each
repeating the batch's header (a notification, a trace); a broadcast's batch (SHARED_AT
users or more) is one message on <p>events instead. With `shards` 1 every doorbell
goes to <p>events, the one channel of hubs older than shards: run 1 while upgrading
from one, then raise it. Publisher and listener must agree on `shards` (the
`pubsub_shards` setting, like `delayed.sets`).

A message is lines of `tenant/user seq` (seq 0: "re-read"). An inline doorbell
(store/inbox/placing.py) starts with `!<notification JSON>` (its fresh copy as `item_json` gives it;
place.lua publishes such messages itself on one Redis); then a line
`tenant/user seq,unread,unseen,total,epoch` says that copy is the user's change `seq`
(of that epoch, lua/common.lua) and those are its counts after it, so a stream that sent
`seq - 1` of the same epoch can send the event without reading the log (realtime/hub.py).
A line without the epoch (a hub older than epochs) is of epoch ''. A user with views gets
their views' counts after the epoch: `,{"name":[unread,unseen,total],...}` (no spaces).

A broadcast is announced before its copies are written (store/inbox/announcing.py): a
message `^<notification JSON>` (its fresh copy's item JSON), then a line
`tenant/user seq-epoch` per recipient who does not hold it yet, their seq and epoch when
it was announced, so a stream that has sent exactly that much sends the notification at
once (realtime/hub.py) and the copy's own doorbell later brings only its counts.

A deferred broadcast (`limits.defer_fanout_at` users or more) is too big to name its users:
its message is `%<notification JSON>` alone, on every channel, once its recipient index is
whole. Each process that hears it asks Redis which of its own streams' users (on that
channel) are recipients and their seqs, and announces it to those streams as above
(store/inbox/announcing.py `announcement_seqs`, realtime/hub.py).

When tracing is on, a publish's doorbell carries its trace: a line `~<traceparent>`
right after the `!` line, or first (notifyhub/tracing.py). Having no space, it names no
user, so a hub with tracing off skips it as it skips a user with no local stream.

Classic PUBLISH on a Cluster is broadcast over the cluster bus to every node, so its
cost grows with the cluster; a sharded message stays on the one shard (master and its
replicas) that owns the channel's slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from notifyhub.store.keys import Keys
from notifyhub.turns import SLICE_ITEMS

INLINE_MARK = b"!"
"""First byte of a doorbell message whose first line is a notification."""

ANNOUNCE_MARK = b"^"
"""First byte of an announcement: a notification whose copies are about to be written."""

DEFERRED_MARK = b"%"
"""First byte of a deferred broadcast's message: its notification, no user lines."""

TRACE_MARK = b"~"
"""First byte of a doorbell line carrying the publish's W3C traceparent."""

SHARED_AT = 64
"""A batch of this many users or more (a broadcast's) rings on the common channel, one
message every process reads: split by shard it would be about a message per user, each
repeating the batch's header (the notification's JSON, ten times the bytes of its line)
for the hubs to read and parse (docs/scaling.md, "Doorbell fan-in")."""

SHARED_LINES = SLICE_ITEMS
"""Re-read lines in one common-channel message at most: every process dispatches a message
in one go, other streams and requests waiting meanwhile (docs/scaling.md, "Big fan-outs
take turns")."""

Changed = Sequence[tuple[str, int | str]]
"""(tenant/user, seq or "seq,unread,unseen,total,epoch") lines of a doorbell."""


def _after(header: bytes, lines: bytes) -> bytes:
    """`lines` after `header`'s line, if there is a header."""
    return header + b"\n" + lines if header else lines


def traced(header: bytes, traceparent: bytes | None) -> bytes:
    """`header` followed by the trace line, when there is a trace."""
    if traceparent is None:
        return header
    return _after(header, TRACE_MARK + traceparent)


def doorbell(changed: Changed, header: bytes = b"") -> bytes:
    """One message per batch: lines of `tenant/user seq`, after `header` if any."""
    return _after(header, "\n".join(f"{m} {s}" for m, s in changed).encode())


class Doorbells:
    """The channel names and the publish commands for one key prefix and mode."""

    def __init__(self, keys: Keys, *, sharded: bool) -> None:
        self.sharded = sharded
        """A Cluster: sharded Pub/Sub (SPUBLISH, SSUBSCRIBE)."""
        self._keys = keys
        self.common = keys.channel
        """Heard by every process: revocations (and every doorbell when `shards` is 1)."""
        self.shards = keys.pubsub_shards
        self.channels = [keys.shard_channel(i) for i in range(self.shards)]
        if self.shards == 1:
            self.channels = [self.common]
        """Every user's doorbell channel, by shard."""

    def channel_of(self, member: str) -> str:
        """User `T/U`'s doorbell channel: their shard's (`Keys.doorbell_shard`)."""
        if self.shards == 1:
            return self.common
        return self.channels[self._keys.doorbell_shard(member)]

    def shared(self, users: int) -> bool:
        """Whether a batch of this many users rings on the common channel (SHARED_AT)."""
        return self.shards == 1 or users >= SHARED_AT

    def channels_of(self, members: Sequence[str]) -> list[str]:
        """The channel of each user's line in a batch of `members`, in order: their
        shard's, or the common channel for all of a broadcast's (`shared`)."""
        if self.shared(len(members)):
            return [self.common] * len(members)
        shard, channels = self._keys.doorbell_shard, self.channels
        return [channels[shard(m)] for m in members]

    def messages(self, changed: Changed, header: bytes = b"") -> list[tuple[str, bytes]]:
        """(channel, payload) pairs: one per shard touched, each starting with `header`
        (a fan-out's `!<notification JSON>`) if given."""
        by_channel: dict[str, list[tuple[str, int | str]]] = {}
        channels = self.channels_of([line[0] for line in changed])
        for channel, line in zip(channels, changed, strict=True):
            by_channel.setdefault(channel, []).append(line)
        return [(channel, doorbell(lines, header)) for channel, lines in by_channel.items()]

    def queue(self, pipe: Any, changed: Changed, header: bytes = b"") -> None:
        """Add the publish commands for `changed` to a (cluster) pipeline."""
        command = self.publish_command
        for channel, payload in self.messages(changed, header):
            pipe.execute_command(command, channel, payload)

    def queue_deferred(self, pipe: Any, payload: bytes) -> None:
        """Add a deferred broadcast's `%` message to a (cluster) pipeline: once, on the
        common channel, which every process hears."""
        pipe.execute_command(self.publish_command, self.common, payload)

    def queue_rereads(self, pipe: Any, members: Sequence[str], header: bytes = b"") -> None:
        """`queue` for "re-read" (seq 0) doorbells, a fan-out's: a join per message of
        SHARED_LINES users at most (each repeating `header`), no line each."""
        if not self.shared(len(members)):
            self.queue(pipe, [(m, 0) for m in members], header)
            return
        for start in range(0, len(members), SHARED_LINES):
            lines = (" 0\n".join(members[start : start + SHARED_LINES]) + " 0").encode()
            pipe.execute_command(self.publish_command, self.common, _after(header, lines))

    @property
    def publish_command(self) -> str:
        return "SPUBLISH" if self.sharded else "PUBLISH"
