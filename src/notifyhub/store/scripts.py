"""Lua scripts shipped as package files, loaded once per Redis client."""

from __future__ import annotations

from importlib.resources import files

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

INBOX_SCRIPTS = (
    "deliver",
    "mark",
    "mark_all",
    "remove",
    "purge",
    "get",
    "counts",
    "page",
    "changes",
)


def _source(name: str) -> str:
    return (files("notifyhub.store") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


class InboxScripts:
    """The inbox scripts, each `common.lua` + its own body, registered on one client."""

    def __init__(self, redis: Redis) -> None:
        common = _source("common")
        loaded = {
            name: redis.register_script(common + "\n" + _source(name)) for name in INBOX_SCRIPTS
        }
        self.deliver: AsyncScript = loaded["deliver"]
        self.mark: AsyncScript = loaded["mark"]
        self.mark_all: AsyncScript = loaded["mark_all"]
        self.remove: AsyncScript = loaded["remove"]
        self.purge: AsyncScript = loaded["purge"]
        self.get: AsyncScript = loaded["get"]
        self.counts: AsyncScript = loaded["counts"]
        self.page: AsyncScript = loaded["page"]
        self.changes: AsyncScript = loaded["changes"]
        self.topic_set: AsyncScript = redis.register_script(_source("topic_set"))
