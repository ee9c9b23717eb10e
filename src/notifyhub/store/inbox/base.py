"""What every part of an inbox store shares: its clients, key layout, limits and scripts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from itertools import repeat
from typing import Any, overload

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.crc import key_slot

from notifyhub.settings import Limits
from notifyhub.store.client import is_cluster
from notifyhub.store.codecs import Args
from notifyhub.store.doorbells import Doorbells
from notifyhub.store.keys import Keys
from notifyhub.store.scripts import InboxScripts

UserRef = tuple[str, str]
"""(tenant, user)."""


class TenantUsers(Sequence[UserRef]):
    """Users of one tenant (a publish's recipients) kept as their ids: a (tenant, user)
    pair is made only when one is asked for. A fan-out to 100,000 users would otherwise
    hold 100,000 pairs until it ends, each an object the cyclic collector scans again at
    every collection meanwhile (docs/scaling.md, "Big fan-outs take turns")."""

    __slots__ = ("ids", "tenant")

    def __init__(self, tenant: str, ids: list[str]) -> None:
        self.tenant = tenant
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> UserRef: ...
    @overload
    def __getitem__(self, index: slice) -> TenantUsers: ...
    def __getitem__(self, index: int | slice) -> UserRef | TenantUsers:
        if isinstance(index, slice):
            return TenantUsers(self.tenant, self.ids[index])
        return self.tenant, self.ids[index]

    def __iter__(self) -> Iterator[UserRef]:
        return zip(repeat(self.tenant), self.ids, strict=False)

    def __repr__(self) -> str:
        return f"TenantUsers({self.tenant!r}, {len(self.ids)} ids)"

    def members(self) -> list[str]:
        """Each user's `T/U` (keys.member), made in C."""
        return list(map(f"{self.tenant}/".__add__, self.ids))

    @classmethod
    def of_members(cls, tenant: str, members: Sequence[str]) -> TenantUsers:
        """The users of `members` (`T/U`, all of `tenant`): `members`' inverse."""
        cut = len(tenant) + 1
        return cls(tenant, [m[cut:] for m in members])


def user_members(users: Sequence[UserRef]) -> list[str]:
    """Each user's `T/U` (keys.member, without a call per user: a 100k fan-out's)."""
    if isinstance(users, TenantUsers):
        return users.members()
    return [f"{t}/{u}" for t, u in users]


def slot_users(keys: list[str], stride: int) -> dict[int, list[int]]:
    """The users (indices) in each Cluster slot, `stride` keys per user, all in the
    user's slot."""
    by_slot: dict[int, list[int]] = {}
    for user, i in enumerate(range(0, len(keys), stride)):
        by_slot.setdefault(key_slot(keys[i].encode()), []).append(user)
    return by_slot


def keys_of(keys: list[str], stride: int, users: list[int]) -> list[str]:
    """The keys of `users` (indices), user after user."""
    return [k for user in users for k in keys[user * stride : (user + 1) * stride]]


AnnounceHere = Callable[[str, bytes, str, Sequence[str]], Awaitable[Any] | None]
"""(notification id, item JSON, tenant, recipients' ids) -> the announcement, under way, of a
deferred broadcast to this process's streams of those recipients; None when it has none
(realtime/hub.py `Hub.announce_here`)."""


class InboxBase:
    """The clients, keys, limits, scripts and doorbells the parts of `InboxStore` share."""

    def __init__(self, redis: Redis, keys: Keys, limits: Limits, *, bulk: Redis | None) -> None:
        self._redis = redis
        self._bulk = bulk or redis
        """For the big pipelines (fan-out, stream reads): a client without per-reply
        timers (`create_redis(socket_timeout_s=None)`); `scripts.pipelined` bounds them."""
        self._keys = keys
        self._limits = limits
        self.scripts = InboxScripts(redis)
        self._cluster = is_cluster(redis)
        self.doorbells = Doorbells(keys, sharded=self._cluster)
        self.announce_here: AnnounceHere | None = None
        """This process's hub's (set when it is made): a deferred broadcast published here
        is announced to the streams here while its index and doorbell are written, when no
        other process listens for the doorbell (`Announcing.announce_deferred`)."""

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def cluster(self) -> bool:
        """Whether the store is a Redis Cluster (a script keeps to one slot)."""
        return self._cluster

    async def _call(self, script: AsyncScript, tenant: str, user: str, args: Args) -> Any:
        """Run one inbox script on one user's keys (lua/common.lua `inbox`)."""
        return await script(keys=self._keys.inbox_list(tenant, user), args=args)
