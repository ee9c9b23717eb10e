"""redis-py internals, tested with redis-py 5.3.1 and 8.1 (the compat job's ends):

- `redis._parsers.hiredis.NOT_ENOUGH_DATA` and a Pub/Sub connection's `_parser._reader`
  (its hiredis reader) and `_reader` (its `asyncio.StreamReader`): the hub's Pub/Sub
  reader takes doorbells straight from the socket (`RawMessages`);
- `RedisCluster.nodes_manager.get_node_from_slot`: the node serving a slot (`slot_node`).

Outside those versions, or where the internals are not there, the hub reads through the
public `PubSub.get_message` (`PolledMessages`) and finds a slot's node through the public
`RedisCluster.get_node_from_key`, with a key of that slot (`_slot_keys`).
"""

from __future__ import annotations

import asyncio
import binascii
from typing import Any

from redis.asyncio.client import PubSub
from redis.asyncio.cluster import NodesManager
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from notifyhub._compat import in_range, installed, plain

TESTED = ">=5.3.1,<8.2"
"""The redis-py versions the fast paths are tested with (pyproject.toml's range)."""
SLOTS = 16384


def _tested() -> bool:
    found = installed("redis")
    if not in_range(found, TESTED):
        plain("redis", f"version {found} is outside the tested {TESTED}")
        return False
    return True


def _not_enough_data() -> object | None:
    """redis-py's "no complete reply yet" sentinel of its hiredis parser, None when the
    fast Pub/Sub reader is off."""
    if not _TESTED:
        return None
    try:
        from redis._parsers.hiredis import NOT_ENOUGH_DATA
    except ImportError as exc:
        plain("redis", f"its hiredis parser is not there ({exc})")
        return None
    return NOT_ENOUGH_DATA


def _knows_slots() -> bool:
    """Whether a Cluster client's `nodes_manager` answers `get_node_from_slot`."""
    if _TESTED and hasattr(NodesManager, "get_node_from_slot"):
        return True
    if _TESTED:
        plain("redis", "its cluster NodesManager has no get_node_from_slot")
    return False


_TESTED = _tested()
_NOT_ENOUGH_DATA = _not_enough_data()


class RawMessages:
    """The replies of a subscribed connection, read straight from its socket.

    redis-py's `PubSub.get_message` costs each doorbell a timeout context, a retry
    wrapper, a health check, a dict and its own metrics hook. This reads what the socket
    has in one call and takes every complete reply from the connection's own hiredis
    reader (which holds whatever redis-py had buffered), as the lists Redis sent. redis-py
    still connects, subscribes and PINGs. Where the connection has no hiredis reader (`of`
    answers None) the hub reads through `PolledMessages`."""

    READ_BYTES = 65536

    def __init__(self, reader: Any, stream: asyncio.StreamReader, incomplete: object) -> None:
        self._reader = reader
        self._stream = stream
        self._incomplete = incomplete
        """What the reader answers while no reply is complete (redis-py's sentinel)."""

    @classmethod
    def of(cls, pubsub: PubSub) -> RawMessages | None:
        if _NOT_ENOUGH_DATA is None:
            return None
        connection = pubsub.connection
        parser = getattr(connection, "_parser", None)
        reader = getattr(parser, "_reader", None)
        stream = getattr(connection, "_reader", None)
        if not (hasattr(reader, "gets") and isinstance(stream, asyncio.StreamReader)):
            return None
        return cls(reader, stream, _NOT_ENOUGH_DATA)

    async def read(self, timeout_s: float) -> list[Any]:
        """The replies received (at least one), or [] after `timeout_s` without any."""
        replies = self._complete()
        if replies:
            return replies
        try:
            async with asyncio.timeout(timeout_s):
                data = await self._stream.read(self.READ_BYTES)
        except TimeoutError:
            return []
        if not data:
            raise RedisConnectionError("Redis closed the pubsub connection")
        self._reader.feed(data)
        return self._complete()

    def _complete(self) -> list[Any]:
        replies = []
        while (reply := self._reader.gets()) is not self._incomplete:
            if isinstance(reply, Exception):
                raise reply if isinstance(reply, RedisError) else RedisError(str(reply))
            replies.append(reply)
        return replies


class PolledMessages:
    """`RawMessages` through redis-py's `get_message` (no hiredis)."""

    def __init__(self, pubsub: PubSub) -> None:
        self._pubsub = pubsub

    async def read(self, timeout_s: float) -> list[Any]:
        message = await self._pubsub.get_message(timeout=timeout_s)
        if message is None:
            return []
        kind = message["type"].encode()
        return [[kind, message["channel"] or b"", message["data"]]]


def pubsub_messages(pubsub: PubSub) -> RawMessages | PolledMessages:
    """The reader of a subscribed connection's replies: `RawMessages` where it can."""
    return RawMessages.of(pubsub) or PolledMessages(pubsub)


def _node_from_slot(cluster: Any, slot: int) -> Any:
    return cluster.nodes_manager.get_node_from_slot(slot)


_SLOT_KEYS: list[str] = []


def _slot_keys() -> list[str]:
    """A key of each of the Cluster's 16384 slots (by its CRC16, as the Cluster spec
    hashes keys), found by counting at first use."""
    if not _SLOT_KEYS:
        keys: dict[int, str] = {}
        number = 0
        while len(keys) < SLOTS:
            key = str(number)
            keys.setdefault(binascii.crc_hqx(key.encode(), 0) % SLOTS, key)
            number += 1
        _SLOT_KEYS.extend(keys[slot] for slot in range(SLOTS))
    return _SLOT_KEYS


def _node_from_key(cluster: Any, slot: int) -> Any:
    return cluster.get_node_from_key(_slot_keys()[slot])


slot_node = _node_from_slot if _knows_slots() else _node_from_key
"""`slot_node(cluster, slot)`: the Cluster node serving `slot` (the master)."""
