"""The escalation check: one script over a user's inbox keys (lua/escalation_check.lua)
decides, atomically with every change to the copy, whether a due step still sends."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from importlib.resources import files

from redis.asyncio import Redis

from notifyhub.store.keys import Keys


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
        self._keys = keys
        self._log_max = log_max
        self._script = redis.register_script(_source("common") + "\n" + _source("escalation_check"))

    async def check(self, tenant: str, user: str, notification_id: str, unless: str) -> Checked:
        """Whether `user`'s copy of `notification_id` still takes a step `unless`."""
        args: list[str | int] = [self._log_max, notification_id, unless]
        raw = await self._script(keys=self._keys.inbox_list(tenant, user), args=args)
        return Checked(Verdict(int(raw[0])), int(raw[1]))
