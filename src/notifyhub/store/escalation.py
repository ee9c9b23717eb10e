"""The escalation check: one script over a user's inbox keys (lua/escalation_check.lua)
decides, atomically with every change to the copy, whether a due step still sends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from importlib.resources import files
from typing import Any

from redis.asyncio import Redis

from notifyhub.store.keys import Keys
from notifyhub.store.scripts import pipelined, queue_script


class Verdict(IntEnum):
    """escalation_check.lua's codes."""

    GONE = 0
    SEND = 1
    SEEN = 2
    READ = 3
    ARCHIVED = 4
    UNKNOWN = 5
    """The user's inbox is not in Redis (lost and not rebuilt yet): ask again later."""


@dataclass(frozen=True, slots=True)
class Checked:
    verdict: Verdict
    at_ms: int
    """When the copy was read (READ), else 0."""


def _source(name: str) -> str:
    return (files("notifyhub.store") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


class EscalationCheck:
    """Runs the check on one user's keys (their hash tag: a Cluster runs it on one node)."""

    def __init__(self, redis: Redis, keys: Keys, log_max: int) -> None:
        self._redis = redis
        self._keys = keys
        self._log_max = log_max
        self._script = redis.register_script(_source("common") + "\n" + _source("escalation_check"))

    async def check(self, tenant: str, user: str, notification_id: str, unless: str) -> Checked:
        """Whether `user`'s copy of `notification_id` still takes a step `unless`."""
        [found] = await self.check_many([(tenant, user, notification_id, unless)])
        if isinstance(found, Exception):
            raise found
        return found

    async def check_many(
        self, asked: Sequence[tuple[str, str, str, str]]
    ) -> list[Checked | Exception]:
        """`check` for each (tenant, user, notification, unless), in one pipeline (each
        still its own atomic script, on its user's node); an error in its place. All
        UNKNOWN unless the epoch marker was there, unchanged, before and after (no
        loss, no rebuild in between)."""

        def build(pipe: Any) -> None:
            for tenant, user, notification_id, unless in asked:
                keys = self._keys.inbox_list(tenant, user)
                queue_script(pipe, self._script, keys, [self._log_max, notification_id, unless])

        marker = await self._redis.get(self._keys.epoch)
        replies = await pipelined(self._redis, build, [self._script], raise_on_error=False)
        if marker is None or await self._redis.get(self._keys.epoch) != marker:
            # Redis lost its data, or is being rebuilt (the marker is set after a
            # rebuild): a copy found now may lack the reads replayed after it.
            return [Checked(Verdict.UNKNOWN, 0)] * len(asked)
        return [
            r if isinstance(r, Exception) else Checked(Verdict(int(r[0])), int(r[1]))
            for r in replies
        ]
