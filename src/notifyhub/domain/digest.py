"""Digests (issue 41 item 3): a burst of notifications under one key, per user, reaches
the user's e-mail and push as ONE message when its window closes, and the inbox as one
thread. This module holds the spec a publish or a rule names and the window arithmetic;
services/digests.py keeps the open digests in PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict

THREAD_PREFIX = "digest:"
"""A digest's notifications share the thread `digest:<key>` unless the publish names one."""
SLIDING_CAP = 4
"""A sliding window closes at the latest SLIDING_CAP windows after it opened (a steady
trickle must not hold its digest back for ever)."""


class Digest(BaseModel):
    """What a publish or a rule asks: notifications with the same `key` for the same user
    within the window become one e-mail or push."""

    model_config = ConfigDict(frozen=True)

    key: str
    window_s: int = 600
    max_items: int = 50
    mode: Literal["sliding", "fixed"] = "fixed"
    first: Literal["now", "wait"] = "wait"
    at: str | None = None
    """`HH:MM`: the window closes at the next such time in the user's zone (daily)."""


def thread_key(key: str) -> str:
    """The thread a digest's notifications share in the inbox."""
    return f"{THREAD_PREFIX}{key}"


def zone(name: str | None) -> ZoneInfo:
    """The user's time zone (UTC for none, or one this system does not know)."""
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def next_local(at: str, after: datetime, tz: ZoneInfo) -> datetime:
    """The first `at` (HH:MM) in `tz` strictly after `after`, in UTC. A time that a
    daylight-saving gap skips is taken as the same wall time shifted forward (zoneinfo's
    fold rule); in an overlap, the first of the two."""
    hour, minute = (int(part) for part in at.split(":"))
    local = after.astimezone(tz)
    day = local.date()
    for offset in range(3):
        wall = datetime.combine(day + timedelta(days=offset), time(hour, minute), tzinfo=tz)
        candidate = wall.astimezone(UTC)
        if candidate > after:
            return candidate
    raise AssertionError("unreachable: a day has every wall time or its shifted one")


def opening_due(spec: Digest, opened: datetime, tz: ZoneInfo) -> datetime:
    """When a digest opened at `opened` closes, as first set."""
    if spec.at is not None:
        return next_local(spec.at, opened, tz)
    return opened + timedelta(seconds=spec.window_s)
