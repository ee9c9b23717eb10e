"""Where a user's change doorbell is rung: one Pub/Sub channel, or sharded channels on a Cluster.

    standalone / Sentinel   PUBLISH  <p>events        every process SUBSCRIBEs to it
    Redis Cluster           SPUBLISH <p>events{i}     i = crc32("T/U") % shards; each
                                                      process SSUBSCRIBEs to every shard
                                                      on the node serving its slot

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
replicas) that owns the channel's slot. Publisher and listener must agree on `shards`
(the `pubsub_shards` setting, like `delayed.sets`).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from notifyhub.store.keys import Keys

INLINE_MARK = b"!"
"""First byte of a doorbell message whose first line is a notification."""

ANNOUNCE_MARK = b"^"
"""First byte of an announcement: a notification whose copies are about to be written."""

DEFERRED_MARK = b"%"
"""First byte of a deferred broadcast's message: its notification, no user lines."""

TRACE_MARK = b"~"
"""First byte of a doorbell line carrying the publish's W3C traceparent."""

Changed = Sequence[tuple[str, int | str]]
"""(tenant/user, seq or "seq,unread,unseen,total,epoch") lines of a doorbell."""


def traced(header: bytes, traceparent: bytes | None) -> bytes:
    """`header` followed by the trace line, when there is a trace."""
    if traceparent is None:
        return header
    line = TRACE_MARK + traceparent
    return header + b"\n" + line if header else line


def doorbell(changed: Changed, header: bytes = b"") -> bytes:
    """One message per batch: lines of `tenant/user seq`, after `header` if any."""
    lines = "\n".join(f"{m} {s}" for m, s in changed).encode()
    return header + b"\n" + lines if header else lines


class Doorbells:
    """The channel names and the publish commands for one key prefix and mode."""

    def __init__(self, keys: Keys, *, sharded: bool) -> None:
        self.sharded = sharded
        self._shards = keys.pubsub_shards
        self.channels = (
            [keys.shard_channel(i) for i in range(self._shards)] if sharded else [keys.channel]
        )

    def channel_of(self, member: str) -> str:
        if not self.sharded:
            return self.channels[0]
        return self.channels[zlib.crc32(member.encode()) % self._shards]

    def messages(self, changed: Changed, header: bytes = b"") -> list[tuple[str, bytes]]:
        """(channel, payload) pairs: one for all of `changed`, or one per shard touched;
        each starts with `header` (a fan-out's `!<notification JSON>`) if given."""
        if not self.sharded:
            return [(self.channels[0], doorbell(changed, header))]
        by_channel: dict[str, list[tuple[str, int | str]]] = {}
        for line in changed:
            by_channel.setdefault(self.channel_of(line[0]), []).append(line)
        return [(channel, doorbell(lines, header)) for channel, lines in by_channel.items()]

    def queue(self, pipe: Any, changed: Changed, header: bytes = b"") -> None:
        """Add the publish commands for `changed` to a (cluster) pipeline."""
        command = "SPUBLISH" if self.sharded else "PUBLISH"
        for channel, payload in self.messages(changed, header):
            pipe.execute_command(command, channel, payload)

    def queue_deferred(self, pipe: Any, payload: bytes) -> None:
        """Add a deferred broadcast's `%` message to a (cluster) pipeline: on every channel,
        so every process hears it (on a Cluster, for its users of each shard channel)."""
        command = "SPUBLISH" if self.sharded else "PUBLISH"
        for channel in self.channels:
            pipe.execute_command(command, channel, payload)

    def queue_rereads(self, pipe: Any, members: Sequence[str], header: bytes = b"") -> None:
        """`queue` for "re-read" (seq 0) doorbells, a fan-out's: one join, no line each."""
        if self.sharded:
            self.queue(pipe, [(m, 0) for m in members], header)
        elif members:
            payload = (" 0\n".join(members) + " 0").encode()
            payload = header + b"\n" + payload if header else payload
            pipe.execute_command("PUBLISH", self.channels[0], payload)
