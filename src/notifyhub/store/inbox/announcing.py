"""Announcing a broadcast to its recipients' streams before its copies are written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from notifyhub.domain.notification import Notification
from notifyhub.store.doorbells import ANNOUNCE_MARK
from notifyhub.store.inbox.base import InboxBase, UserRef, keys_of, slot_users, user_members
from notifyhub.store.inbox.copies import copy_content, fresh_item, is_inlinable
from notifyhub.store.scripts import pipelined, queue_script, slot_node

ANNOUNCE_FIELDS = ("state", "cnt", "seq")
"""The keys announce.lua reads per user."""
ANNOUNCE_BATCH = 1000
"""Users per announce.lua call: the first streams hear of a broadcast after one batch, and
no call holds Redis for long."""


class Announcing(InboxBase):
    """The `^` doorbells of a broadcast (announce.lua)."""

    async def announce(
        self, notification: Notification, users: Sequence[UserRef], *, pull: bool = False
    ) -> int:
        """Tell the streams of `users` about an inlinable notification before its copies
        are written (a big broadcast's streams then wait for one message, not for every
        copy): announce.lua names each user who does not hold it yet with their seq and
        epoch now, ANNOUNCE_BATCH users per call, all in one round trip, in `^` doorbells
        (store/doorbells.py). A stream that has sent exactly that seq sends the
        notification at once and its copy's change later without it (realtime/sse.py).
        Only where the copy's event is the notification as it is (no category that
        preferences may silence, no collapse key, thread or `pull`). On one Redis each
        call publishes its doorbells, one per shard channel of its users; on a Cluster
        (whose script may not publish to another slot's shard channel) one call per slot
        group answers its lines and a second round trip publishes them per shard.
        Returns how many users were named."""
        n = notification
        if not (users and is_inlinable(n, pull=pull)):
            return 0
        content, _ = copy_content(notification)
        header = ANNOUNCE_MARK + fresh_item(content)
        members = user_members(users)
        keys = self._keys.user_keys(members, ANNOUNCE_FIELDS)
        if self._cluster:
            return await self._announce_sharded(n.id, header, members, keys)
        script, width = self.scripts.announce, len(ANNOUNCE_FIELDS)
        channels = self.doorbells.channels_of(members)

        def build(pipe: Any) -> None:
            for start in range(0, len(members), ANNOUNCE_BATCH):
                end = start + ANNOUNCE_BATCH
                batch, to = members[start:end], channels[start:end]
                batch_keys = keys[start * width : (start + len(batch)) * width]
                queue_script(pipe, script, batch_keys, [n.id, "1", header, *batch, *to])

        return sum(int(named) for named in await pipelined(self._bulk, build, self.scripts.all))

    async def _announce_sharded(
        self, nid: str, header: bytes, members: list[str], keys: list[str]
    ) -> int:
        """`announce` on a Cluster: the lines of each slot group, then their doorbells."""
        width, script = len(ANNOUNCE_FIELDS), self.scripts.announce
        by_slot = slot_users(keys, width)

        def build(pipe: Any) -> None:
            for slot, group in by_slot.items():
                group_keys = keys_of(keys, width, group)
                args: list[str | bytes] = [nid, "", header, *(members[i] for i in group)]
                queue_script(pipe, script, group_keys, args, node=slot_node(self._redis, slot))

        replies = await pipelined(self._bulk, build, self.scripts.all)
        named = [line.decode().rpartition(" ") for reply in replies for line in reply]
        if named:
            changed = [(member, at) for member, _, at in named]
            await pipelined(
                self._bulk, lambda pipe: self.doorbells.queue(pipe, changed, header), []
            )
        return len(named)
