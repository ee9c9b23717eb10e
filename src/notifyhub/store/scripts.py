"""Lua scripts shipped as package files, loaded once per Redis client."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from importlib.resources import files
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from notifyhub.store.client import SOCKET_TIMEOUT_S

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


def queue(pipe: Pipeline, script: AsyncScript, keys: Sequence[str], args: Iterable[Any]) -> None:
    """Queue one EVALSHA of `script` on `pipe`.

    Unlike `script(..., client=pipe)`, this does not make the pipeline ask SCRIPT EXISTS
    before every execute (redis-py does, costing a round trip per pipeline); run the
    pipeline with `execute` below, which loads the scripts only when Redis lacks them.
    """
    pipe.evalsha(script.sha, len(keys), *keys, *args)


async def execute(
    redis: Redis,
    scripts: Sequence[AsyncScript],
    build: Callable[[Pipeline], None],
    *,
    timeout_s: float = SOCKET_TIMEOUT_S,
) -> list[Any]:
    """Build and run a non-transactional pipeline that `queue`s some of `scripts`.

    When Redis answers NOSCRIPT (it restarted, or SCRIPT FLUSH), the scripts are loaded
    and the pipeline is built and run once more, so `build` must queue commands that are
    safe to repeat (every caller's are: idempotent writes, reads and doorbells). The
    whole run is bounded by one timer of `timeout_s` (the client for big pipelines
    arms none per reply); a connection cut off mid-reply is closed, never reused."""
    try:
        async with asyncio.timeout(timeout_s):
            for attempt in (1, 2):
                async with redis.pipeline(transaction=False) as pipe:
                    build(pipe)
                    try:
                        return await pipe.execute()
                    except NoScriptError:
                        if attempt == 2:
                            raise
                for script in scripts:
                    script.sha = await redis.script_load(script.script)
    except TimeoutError as exc:
        raise RedisTimeoutError(f"Redis did not answer a pipeline in {timeout_s:g} s") from exc
    raise AssertionError("unreachable")
