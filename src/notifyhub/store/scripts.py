"""Lua scripts shipped as package files, loaded once per Redis client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from importlib.resources import files
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterPipeline
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

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


async def queue_script(
    pipe: Any,
    script: AsyncScript,
    keys: Sequence[str],
    args: Sequence[str | bytes | int],
    *,
    node: Any = None,
) -> None:
    """Queue `script` on a pipeline. A Cluster pipeline refuses `evalsha()` and cannot
    load scripts, so it gets the raw EVALSHA (see `pipelined`), routed by its keys' slot
    or, when the caller knows it, to `node` (redis-py then skips hashing every key)."""
    if isinstance(pipe, ClusterPipeline):
        route = {"target_nodes": node} if node is not None else {}
        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args, **route)
    else:
        await script(keys=keys, args=args, client=pipe)


async def pipelined(
    redis: Redis, build: Callable[[Any], Awaitable[None]], scripts: Iterable[AsyncScript]
) -> list[Any]:
    """Build and run one non-transactional pipeline. On a Cluster a node that lacks a
    script (a fresh cluster, a replica promoted by a failover) answers NOSCRIPT: load
    `scripts` on every master and run the pipeline once more, so `build` must queue only
    idempotent steps (ours are)."""
    for attempt in range(2):
        async with redis.pipeline(transaction=False) as pipe:
            await build(pipe)
            try:
                return list(await pipe.execute())
            except NoScriptError:
                if attempt:
                    raise
        for script in scripts:
            await redis.script_load(script.script)
    raise AssertionError("unreachable")


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
        self.topic_get: AsyncScript = redis.register_script(_source("topic_get"))
        self.all = [*loaded.values(), self.topic_set, self.topic_get]
