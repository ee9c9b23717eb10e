"""A stream's `quiet: true`: a `notification` event sent while its user is in quiet
hours says so, so front ends skip the toast (issue 41 item 2). The stream asks a
`QuietFlag` (services/quiet_hours.py `StreamQuiet`, which reads the user's schedule off
the hot path) and rewrites only the notification events it writes then: no event is
delayed, and a stream of a user with no quiet hours writes its frames as they are."""

from __future__ import annotations

import re
from typing import Protocol

import orjson

_NOTIFICATION_DATA = re.compile(rb"(event: notification\nid: [^\n]*\ndata: )\{([^\n]*)")
QUIET_FIELD = b'{"quiet":true,'
CRITICAL = b'"severity":"critical"'
"""How a critical notification's data says so (the hub writes its JSON compactly): never
held, so never quiet either (docs/attention.md "Quiet hours"). Its own field, not a key of
its `data`, decides: an event that holds the text is read to tell."""


class QuietFlag(Protocol):
    def quiet(self) -> bool:
        """Whether the stream's user is in quiet hours now."""
        ...


def mark_quiet(frames: bytes) -> bytes:
    """`frames` with `"quiet": true` first in each `notification` event's data, but a
    critical one's: its toast shows in quiet hours too."""
    return _NOTIFICATION_DATA.sub(_quieted, frames)


def _quieted(match: re.Match[bytes]) -> bytes:
    head, rest = match.group(1), match.group(2)
    if CRITICAL in rest and _critical(b"{" + rest):
        return match.group(0)
    return head + QUIET_FIELD + rest


def _critical(data: bytes) -> bool:
    try:
        return bool(orjson.loads(data).get("severity") == "critical")
    except (orjson.JSONDecodeError, AttributeError):
        return False


def flagged(frames: bytes, flag: QuietFlag | None) -> bytes:
    """`frames` as the stream writes them: marked quiet when they hold a notification and
    its user is in quiet hours now."""
    if flag is None or b"event: notification" not in frames or not flag.quiet():
        return frames
    return mark_quiet(frames)
