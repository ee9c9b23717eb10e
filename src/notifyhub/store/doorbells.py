"""Where a user's change doorbell is rung: one Pub/Sub channel, or sharded channels on a Cluster.

    standalone / Sentinel   PUBLISH  <p>events        every process SUBSCRIBEs to it
    Redis Cluster           SPUBLISH <p>events{i}     i = crc32("T/U") % shards; each
                                                      process SSUBSCRIBEs to every shard
                                                      on the node serving its slot

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


def doorbell(changed: Sequence[tuple[str, int]]) -> bytes:
    """One message per batch: lines of `tenant/user seq` (seq 0: "re-read")."""
    return "\n".join(f"{m} {s}" for m, s in changed).encode()


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

    def messages(self, changed: Sequence[tuple[str, int]]) -> list[tuple[str, bytes]]:
        """(channel, payload) pairs: one for all of `changed`, or one per shard touched."""
        if not self.sharded:
            return [(self.channels[0], doorbell(changed))]
        by_channel: dict[str, list[tuple[str, int]]] = {}
        for line in changed:
            by_channel.setdefault(self.channel_of(line[0]), []).append(line)
        return [(channel, doorbell(lines)) for channel, lines in by_channel.items()]

    def queue(self, pipe: Any, changed: Sequence[tuple[str, int]]) -> None:
        """Add the publish commands for `changed` to a (cluster) pipeline."""
        command = "SPUBLISH" if self.sharded else "PUBLISH"
        for channel, payload in self.messages(changed):
            pipe.execute_command(command, channel, payload)
