"""Announcing a broadcast to its recipients' streams before its copies are written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from redis.crc import key_slot

from notifyhub.domain.notification import Notification
from notifyhub.store.doorbells import ANNOUNCE_MARK, DEFERRED_MARK
from notifyhub.store.inbox.base import (
    InboxBase,
    TenantUsers,
    UserRef,
    keys_of,
    slot_users,
    user_members,
)
from notifyhub.store.inbox.copies import copy_content, fresh_item, is_inlinable
from notifyhub.store.scripts import pipelined, pipelined_each, queue_script, slot_node
from notifyhub.turns import SLICE_ITEMS, sliced

ANNOUNCE_FIELDS = ("state", "cnt", "seq")
"""The keys announce.lua reads per user."""
ANNOUNCE_BATCH = 1000
"""Users per announce.lua call: the first streams hear of a broadcast after one batch, and
no call holds Redis for long."""
INDEX_BATCH = SLICE_ITEMS
"""Users per SADD of a deferred broadcast's recipient index, each in a pipeline of its own
(two in flight): a bigger one holds the loop while it is packed, and Redis while it runs
(docs/scaling.md, "Big fan-outs take turns"). A plain SADD, packed by hiredis in C
(store/client.py): a Lua script splitting the users out of one argument held Redis
longer (docs/scaling.md, "The POST rests too")."""


class Announcing(InboxBase):
    """The `^` doorbells of a broadcast (announce.lua); a deferred broadcast's `%` doorbell
    and the seqs each process announces it at."""

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

    async def announce_deferred(
        self, notification: Notification, users: Sequence[UserRef], *, pull: bool = False
    ) -> list[str]:
        """A deferred fan-out's first step (`placement(defer=True)` then writes the pending
        copies and the expiry index, not the recipient index): the notification's whole
        recipient index (a recall finds every user a crash may have reached), then, for an
        inlinable notification, one `%` doorbell on every channel with its item JSON
        (store/doorbells.py). Naming 20,000 users or more would cost as much as deferring
        their copies; instead each process that hears it asks `announcement_seqs` about its
        own streams' users and announces it to them (realtime/hub.py), so open streams show
        it in time that grows with their number, not the group's. When no other process
        hears the doorbell (`_heard_elsewhere`), this process announces it to its own
        streams while the index is written (`announce_here`: it knows the recipients, so no
        index to ask and no doorbell to wait for). When others do, it takes its own `%`
        like them: announcing here meanwhile would share this process's loop with the
        index, and every other process's streams would wait for both. Returns once the
        index, the doorbell and any announcement here are written. The users are named
        (`T/U`) for the index slice by slice as it is written, and that writing rests when
        others waited. On a Cluster the index is written (on its own slot) before the
        doorbells are sent, in a second round trip: a Cluster pipeline runs on several
        nodes at once. Returns the recipients as `T/U`, for `ring_deferred`."""
        n = notification
        recipients = self._keys.recipients(n.id)
        expires_s = int(n.expires_at.timestamp()) + 1
        ring = is_inlinable(n, pull=pull)
        payload = DEFERRED_MARK + fresh_item(copy_content(n)[0])
        members: list[str] = []

        def tail(pipe: Any) -> None:
            pipe.expireat(recipients, expires_s)
            if ring and not self._cluster:  # after the index
                self.doorbells.queue_deferred(pipe, payload)

        rest_s = self._limits.defer_pause_ms / 1000

        async def adds() -> AsyncGenerator[Callable[[Any], None]]:
            async for part in sliced(users, INDEX_BATCH, rest_s=rest_s):
                named = user_members(part)
                members.extend(named)
                yield partial(_add, recipients, named)

        async def index() -> None:  # one SADD per round trip, two in flight; the tail
            await pipelined_each(self._bulk, adds())
            await pipelined(self._bulk, tail, [])

        here = ring and self.announce_here is not None and not await self._heard_elsewhere()
        indexing = asyncio.ensure_future(index())  # the others wait
        announcing = self._announce_here(n.id, payload[1:], users) if here else []
        await asyncio.gather(indexing, *announcing)
        if ring and self._cluster:
            await pipelined(self._bulk, lambda p: self.doorbells.queue_deferred(p, payload), [])
        return members

    async def _heard_elsewhere(self) -> bool:
        """Whether a hub process besides this one listens on the common channel (every
        process does: the `%` doorbell's), as Redis counts its subscribers now."""
        common = self.doorbells.common
        if self.doorbells.sharded:  # asked of the master serving the channel's slot
            node = slot_node(self._redis, key_slot(common.encode()))
            route = {"target_nodes": node} if node is not None else {}
            counted = await self._redis.pubsub_shardnumsub(common, **route)
        else:
            counted = await self._redis.pubsub_numsub(common)
        return sum(int(n) for _channel, n in counted) > 1

    def _announce_here(
        self, nid: str, body: bytes, users: Sequence[UserRef]
    ) -> list[Awaitable[Any]]:
        """`announce_here` of `users` (a `TenantUsers`' ids as they are; other refs by
        tenant), under way; none when this process has no hub."""
        here = self.announce_here
        if here is None:
            return []
        if isinstance(users, TenantUsers):
            groups: list[tuple[str, Sequence[str]]] = [(users.tenant, users.ids)]
        else:
            by_tenant: dict[str, list[str]] = {}
            for tenant, user in users:
                by_tenant.setdefault(tenant, []).append(user)
            groups = list(by_tenant.items())
        under_way = (here(nid, body, tenant, ids) for tenant, ids in groups)
        return [announcing for announcing in under_way if announcing is not None]

    async def announcement_seqs(
        self, nid: str, members: Sequence[str], known: bool = False
    ) -> list[tuple[str, str]]:
        """Of `members` (`T/U`: users with a stream in this process), those among the
        recipients of deferred broadcast `nid` who do not hold it yet, each with their
        `seq-epoch` now (announce.lua, without a doorbell: the caller announces to its own
        streams). Two round trips whatever the group's size: SMISMEMBER on the recipient
        index, then announce.lua, ANNOUNCE_BATCH users per call (per slot group on a
        Cluster); one when every member is `known` to be a recipient (the publishing
        process's own, while the index is written)."""
        named = list(members)
        if not known:
            found = await self._redis.smismember(self._keys.recipients(nid), named)
            named = [m for m, isin in zip(members, found, strict=True) if isin]
        if not named:
            return []
        width, script = len(ANNOUNCE_FIELDS), self.scripts.announce
        keys = self._keys.user_keys(named, ANNOUNCE_FIELDS)
        by_slot = slot_users(keys, width) if self._cluster else {-1: list(range(len(named)))}

        def build(pipe: Any) -> None:
            for slot, group in by_slot.items():
                node = slot_node(self._redis, slot)
                for start in range(0, len(group), ANNOUNCE_BATCH):
                    part = group[start : start + ANNOUNCE_BATCH]
                    args: list[str | bytes] = [nid, "", "", *(named[i] for i in part)]
                    queue_script(pipe, script, keys_of(keys, width, part), args, node=node)

        replies = await pipelined(self._bulk, build, self.scripts.all)
        lines = [line.decode().rpartition(" ") for reply in replies for line in reply]
        return [(member, at) for member, _, at in lines]


def _add(key: str, members: Sequence[str], pipe: Any) -> None:
    pipe.sadd(key, *members)
