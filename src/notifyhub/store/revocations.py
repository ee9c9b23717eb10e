"""Revocations every hub process hears at once: messages on the doorbells' Pub/Sub channel,
and users' token "not before" times in one Redis hash.

A revocation is a doorbell message starting with `REVOKE_MARK` (store/doorbells.py), on
the doorbells' common channel, to which every process is subscribed (SSUBSCRIBEd on a
Cluster), whichever streams it holds:

    -k <key id>              the API key was revoked: end the streams it opened, drop it
                             from every key cache
    -u <T/U> <ms>            the user's tokens issued at or before <ms> are refused: end
                             their streams

Its first line has no `T/U` of a stream (no tenant may hold a space), so a hub older
than this skips it like a line naming no local stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from notifyhub.store.client import is_cluster
from notifyhub.store.doorbells import Doorbells
from notifyhub.store.keys import Keys

REVOKE_MARK = b"-"
"""First byte of a revocation message."""


@dataclass(frozen=True, slots=True)
class Revocation:
    """An API key revoked (`key_id`), or a user's tokens (`member` `T/U`, `not_before_ms`)."""

    key_id: str | None = None
    member: str | None = None
    not_before_ms: int = 0

    def message(self) -> bytes:
        if self.key_id is not None:
            return REVOKE_MARK + b"k " + self.key_id.encode()
        assert self.member is not None
        return REVOKE_MARK + f"u {self.member} {self.not_before_ms}".encode()

    @classmethod
    def parse(cls, payload: bytes) -> Revocation | None:
        """The revocation a message carries; None for one this hub does not know."""
        kind, _, rest = payload[1:].decode(errors="replace").partition(" ")
        if kind == "k" and rest:
            return cls(key_id=rest)
        member, _, ms = rest.rpartition(" ")
        if kind == "u" and member and ms.isascii() and ms.isdigit():
            return cls(member=member, not_before_ms=int(ms))
        return None


class RevocationStore:
    """Publishes revocations, and keeps users' "not before" times in Redis."""

    def __init__(self, redis: Any, keys: Keys, doorbells: Doorbells) -> None:
        self._redis = redis
        self._keys = keys
        self._doorbells = doorbells

    async def announce(self, revocation: Revocation) -> None:
        """Tell every hub process (each ends the streams concerned and forgets the key)."""
        publish = self._redis.spublish if self._doorbells.sharded else self._redis.publish
        await publish(self._doorbells.common, revocation.message())

    async def set_not_before(self, member: str, not_before_ms: int) -> None:
        """Record user `T/U`'s "not before" (a later one only: never moved back)."""
        current = await self._redis.hget(self._keys.token_nbf, member)
        if current is None or int(current) < not_before_ms:
            await self._redis.hset(self._keys.token_nbf, member, str(not_before_ms))

    async def not_befores(self) -> dict[str, int]:
        """Every user's "not before", by `T/U`."""
        found = await self._redis.hgetall(self._keys.token_nbf)
        return {_text(m): int(ms) for m, ms in found.items()}


async def announce_key_revoked(redis: Any, keys: Keys, key_id: str) -> None:
    """Tell every running hub that API key `key_id` was revoked (the CLI's revoke, which
    so needs no more than Redis's client and this module)."""
    doorbells = Doorbells(keys, sharded=is_cluster(redis))
    await RevocationStore(redis, keys, doorbells).announce(Revocation(key_id=key_id))


async def restore(redis: Any, keys: Keys, not_befores: dict[str, int]) -> None:
    """Write PostgreSQL's copy of the "not before" times back (after Redis lost data)."""
    if not_befores:
        mapping = {m: str(ms) for m, ms in not_befores.items()}
        await redis.hset(keys.token_nbf, mapping=mapping)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
