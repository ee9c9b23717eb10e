"""Lua scripts shipped as package files, loaded once per Redis client."""

from __future__ import annotations

import asyncio
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from contextlib import aclosing
from importlib.resources import files
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.crc import key_slot
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from notifyhub import deadline as request_deadline
from notifyhub._compat.redis import slot_node as cluster_slot_node
from notifyhub.store.client import SOCKET_TIMEOUT_S, is_cluster
from notifyhub.store.operations import OPERATIONS

READ_SCRIPTS = ("get", "counts", "page", "changes", "activities")
"""Inbox scripts that read (after placing and purging); the writing ones are
store/operations.py's."""

T = TypeVar("T")

INBOX_SCRIPTS = tuple(dict.fromkeys([*(op.script for op in OPERATIONS.values()), *READ_SCRIPTS]))


def queue_script(
    pipe: Any,
    script: AsyncScript,
    keys: Sequence[str],
    args: Sequence[str | bytes | int | float],
    *,
    node: Any = None,
) -> None:
    """Queue one raw EVALSHA of `script` on a pipeline (plain or Cluster).

    Not `script(..., client=pipe)`: that makes a plain pipeline ask SCRIPT EXISTS before
    every execute (a round trip each time), and a Cluster pipeline refuses it. Scripts
    are loaded only when Redis answers NOSCRIPT (`pipelined`). On a Cluster the command
    is routed by its keys' slot or, when the caller knows it, to `node` (redis-py then
    skips hashing every key)."""
    route = {"target_nodes": node} if node is not None else {}
    pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args, **route)


def slot_node(redis: Redis, slot: int) -> Any:
    """The Cluster node serving `slot`, for `queue_script`'s `node` (None on one Redis:
    one connection). Asked while a pipeline is built: a Cluster client that has sent
    nothing yet knows no slots. None too outside the redis-py versions the lookup is tested
    with (`_compat/redis.py`): redis-py then routes by the keys."""
    if not is_cluster(redis):
        return None
    return cluster_slot_node(redis, slot)


async def pipelined(
    redis: Redis,
    build: Callable[[Any], None],
    scripts: Iterable[AsyncScript],
    *,
    timeout_s: float = SOCKET_TIMEOUT_S,
    raise_on_error: bool = True,
) -> list[Any]:
    """Build and run one non-transactional pipeline.

    A server that lacks a script (restarted, SCRIPT FLUSH, a fresh cluster node, a
    replica promoted by a failover) answers NOSCRIPT: `scripts` are loaded (on every
    master) and the pipeline is built and run once more, so `build` must queue only
    idempotent steps (ours are: idempotent writes, reads and doorbells). The whole run
    is bounded by one timer of `timeout_s` (the client for big pipelines arms none per
    reply); a connection cut off mid-reply is closed, never reused. `raise_on_error`
    False: a command's error reply is returned in its place (pipelines that serve
    several callers hand each its own), NOSCRIPT still reloads."""
    try:
        async with asyncio.timeout(timeout_s):
            for attempt in range(2):
                async with redis.pipeline(transaction=False) as pipe:
                    build(pipe)
                    try:
                        results = list(await pipe.execute(raise_on_error=raise_on_error))
                    except NoScriptError:
                        if attempt:
                            raise
                    else:  # (raising on errors, redis-py raised a NOSCRIPT above)
                        missing = None if raise_on_error else _first_noscript(results)
                        if missing is None:
                            return results
                        if attempt:
                            raise missing
                for script in scripts:
                    script.sha = await redis.script_load(script.script)
    except TimeoutError as exc:
        raise RedisTimeoutError(f"Redis did not answer a pipeline in {timeout_s:g} s") from exc
    raise AssertionError("unreachable")


async def pipelined_each(
    redis: Redis,
    builds: AsyncGenerator[Callable[[Any], None]],
    *,
    most: int = 2,
    scripts: Sequence[AsyncScript] = (),
) -> None:
    """`pipelined` (of `scripts`) for each of `builds` as it comes, at most `most` in flight:
    the next is built and packed while Redis runs the ones before, instead of a round trip
    each in turn. The first error is raised once the others in flight are cancelled and
    ended, and none is started after it (`builds` is closed here, not left to the
    collector). Each round trip that ends renews the request's deadline (notifyhub/
    deadline.py): a bulk write making progress is not cut short as one stuck on Redis."""
    in_flight: set[asyncio.Future[list[Any]]] = set()
    try:
        async with aclosing(builds):
            async for build in builds:
                if len(in_flight) >= most:
                    done, in_flight = await asyncio.wait(in_flight, return_when=FIRST_COMPLETED)
                    _raise_first(done)
                    request_deadline.renew()
                in_flight.add(asyncio.ensure_future(pipelined(redis, build, list(scripts))))
        while in_flight:
            done, in_flight = await asyncio.wait(in_flight, return_when=FIRST_COMPLETED)
            _raise_first(done)
            request_deadline.renew()
    finally:  # what is left in flight after an error (or a cancel) ends before this does
        for left in in_flight:
            left.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)


def _raise_first(done: set[asyncio.Future[list[Any]]]) -> None:
    """The first error of pipelines that ended (every one retrieved)."""
    errors = [error for error in (ended.exception() for ended in done) if error is not None]
    if errors:
        raise errors[0]


def _first_noscript(results: list[Any]) -> NoScriptError | None:
    """The first NOSCRIPT among a pipeline's replies (errors returned in place), if any."""
    return next((r for r in results if isinstance(r, NoScriptError)), None)


def _source(name: str) -> str:
    return (files("notifyhub.store") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def register_lua(redis: Redis, name: str) -> AsyncScript:
    """lua/<name>.lua registered on `redis` as it is (a script without common.lua)."""
    return redis.register_script(_source(name))


def slot_calls(
    entries: Sequence[tuple[str, T, int]], *, cluster: bool, limit: int
) -> list[tuple[int, list[tuple[str, T]]]]:
    """Script calls for many keys, each `(key, value, weight)`: per call its Cluster slot
    (-1 on one Redis) and its entries, all of one slot (on one Redis, any), their weights
    adding up to `limit` at most unless a single entry weighs more."""
    groups: dict[int, list[tuple[str, T, int]]] = {}
    for entry in entries:
        groups.setdefault(key_slot(entry[0].encode()) if cluster else -1, []).append(entry)
    calls: list[tuple[int, list[tuple[str, T]]]] = []
    for slot, group in groups.items():
        call: list[tuple[str, T]] = []
        weight = 0
        for key, value, w in group:
            if call and weight + w > limit:
                calls.append((slot, call))
                call, weight = [], 0
            call.append((key, value))
            weight += w
        calls.append((slot, call))
    return calls


class InboxScripts:
    """The inbox scripts, each `common.lua` + its own body, registered on one client."""

    def __init__(self, redis: Redis) -> None:
        common = _source("common")
        loaded = {
            name: redis.register_script(common + "\n" + _source(name)) for name in INBOX_SCRIPTS
        }
        self.place: AsyncScript = loaded["place"]
        self.mark: AsyncScript = loaded["mark"]
        self.mark_all: AsyncScript = loaded["mark_all"]
        self.remove: AsyncScript = loaded["remove"]
        self.recall: AsyncScript = loaded["recall"]
        self.purge: AsyncScript = loaded["purge"]
        self.get: AsyncScript = loaded["get"]
        self.counts: AsyncScript = loaded["counts"]
        self.page: AsyncScript = loaded["page"]
        self.changes: AsyncScript = loaded["changes"]
        self.defer: AsyncScript = loaded["defer"]
        self.place_pending: AsyncScript = loaded["place_pending"]
        self.resurface: AsyncScript = loaded["resurface"]
        self.act: AsyncScript = loaded["act"]
        self.activities: AsyncScript = loaded["activities"]
        self.views: AsyncScript = loaded["views"]
        self.topic_set = register_lua(redis, "topic_set")
        self.topic_get = register_lua(redis, "topic_get")
        self.announce = register_lua(redis, "announce")
        self.all = [
            *loaded.values(),
            self.topic_set,
            self.topic_get,
            self.announce,
        ]
