"""Reading a routing trace back: its meta and the lines of one user or of everyone."""

from __future__ import annotations

import orjson
from redis.asyncio import Redis

from notifyhub.domain.escalation import MAX_STEPS
from notifyhub.store.traces.model import (
    CHANNELS,
    STREAMED,
    RoutingTrace,
    bucket_of,
    escalation_field,
    lines_of,
    merge_escalations,
)


async def read_trace(
    redis: Redis, key: str, *, user: str | None = None, limit: int = 100
) -> RoutingTrace | None:
    """The trace at `key` (None: none kept); its lines: `user`'s alone (their bucket
    alone is read), or the first `limit` by user id."""
    buckets: list[bytes]
    streamed: dict[str, int] = {}
    channels: dict[str, dict[str, str]] = {}
    if user is not None:
        meta, bucket, recalled, count, sent = await redis.hmget(
            key, ["meta", bucket_of(user), "recalled", STREAMED + user, CHANNELS + user]
        )
        buckets = [bucket] if isinstance(bucket, bytes) else []
        if count is not None:
            streamed[user] = int(count)
        if sent is not None:
            channels[user] = orjson.loads(sent)
        steps = [escalation_field(user, step) for step in range(1, MAX_STEPS + 1)]
        escalated = await redis.hmget(key, steps)
        found_steps = {
            f.encode(): v for f, v in zip(steps, escalated, strict=True) if isinstance(v, bytes)
        }
        merge_escalations(channels, found_steps)
    else:
        found: dict[bytes, bytes] = await redis.hgetall(key)  # type: ignore[assignment]
        meta, recalled = found.get(b"meta"), found.get(b"recalled")
        buckets = [raw for name, raw in found.items() if name.startswith(b"b:")]
        prefix = STREAMED.encode()
        streamed = {
            name[len(prefix) :].decode(): int(raw)
            for name, raw in found.items()
            if name.startswith(prefix)
        }
        sent_prefix = CHANNELS.encode()
        channels = {
            name[len(sent_prefix) :].decode(): orjson.loads(raw)
            for name, raw in found.items()
            if name.startswith(sent_prefix)
        }
        merge_escalations(channels, found)
    if meta is None:
        return None
    lines = sorted(
        line for raw in buckets for line in lines_of(orjson.loads(raw), streamed, channels)
    )
    if user is not None:
        lines = [line for line in lines if line.user == user]
    return RoutingTrace(orjson.loads(meta), lines[:limit], int(recalled) if recalled else None)
