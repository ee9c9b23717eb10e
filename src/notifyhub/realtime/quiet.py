"""A stream's `quiet: true`: a `notification` event sent while its user is in quiet
hours says so, so front ends skip the toast (issue 41 item 2). The stream asks a
`QuietFlag` (services/quiet_hours.py `StreamQuiet`, which reads the user's schedule off
the hot path) and rewrites only the notification events it writes then: no event is
delayed, and a stream of a user with no quiet hours writes its frames as they are."""

from __future__ import annotations

import re
from typing import Protocol

_NOTIFICATION_DATA = re.compile(rb"(event: notification\nid: [^\n]*\ndata: )\{")
QUIET_FIELD = b'{"quiet":true,'


class QuietFlag(Protocol):
    def quiet(self) -> bool:
        """Whether the stream's user is in quiet hours now."""
        ...


def mark_quiet(frames: bytes) -> bytes:
    """`frames` with `"quiet": true` first in each `notification` event's data."""
    return _NOTIFICATION_DATA.sub(rb"\1" + QUIET_FIELD, frames)


def flagged(frames: bytes, flag: QuietFlag | None) -> bytes:
    """`frames` as the stream writes them: marked quiet when they hold a notification and
    its user is in quiet hours now."""
    if flag is None or b"event: notification" not in frames or not flag.quiet():
        return frames
    return mark_quiet(frames)
