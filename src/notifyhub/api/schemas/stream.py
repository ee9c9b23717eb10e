"""The event stream's token and the data of its `update`, `delete` and `counts` events."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from notifyhub.api.schemas.common import TIME_EXAMPLE, ULID_EXAMPLE, Documented, Timestamp, examples


class StreamToken(Documented):
    """A short-lived token for `GET /v1/me/stream?access_token=...` (EventSource cannot
    send headers)."""

    model_config = examples(
        {
            "token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl",
            "expires_at": TIME_EXAMPLE,
        }
    )

    token: str
    """Valid for the stream only, and only until `expires_at`."""
    expires_at: datetime
    """When it stops being accepted (60 s after minting by default)."""


class StreamUpdate(Documented):
    """The data of an `update` event: a notification's read/seen state changed."""

    model_config = examples(
        {"id": ULID_EXAMPLE, "status": "read", "seen": True, "read_at": TIME_EXAMPLE}
    )

    id: str
    """The notification's id."""
    status: Literal["unread", "read"]
    """Its status now."""
    seen: bool
    """Whether it is seen now."""
    read_at: Timestamp | None
    """When it was read; null when unread."""


class StreamDelete(Documented):
    """The data of a `delete` event: a notification left the inbox (deleted, recalled,
    expired, evicted, or replaced by one with the same collapse key)."""

    model_config = examples({"id": ULID_EXAMPLE})

    id: str
    """The notification's id."""


class StreamViewCount(Documented):
    """One view's counts in a `counts` or `reset` event."""

    unread: int
    """Unread notifications in the view."""
    unseen: int
    """Notifications in the view not yet seen."""
    total: int
    """Notifications in the view (archived and snoozed ones are in no count)."""
    exact: bool = True
    """Present, and false, while the view is being recounted after its definition changed
    (its counts then follow the definition before): on a new stream's first counts or a
    `reset`, and on the stream's counts until the recount reaches the user (a `counts`
    event without it follows). A stream resumed with `Last-Event-ID` does not mark it."""


class StreamCounts(Documented):
    """The data of a `counts` event (after every change) and of a `reset` event."""

    model_config = examples(
        {"unread": 3, "unseen": 1, "total": 17, "seq": 42},
        {
            "unread": 3,
            "unseen": 1,
            "total": 17,
            "seq": 43,
            "views": {"mentions": {"unread": 1, "unseen": 0, "total": 4, "exact": False}},
        },
    )

    unread: int
    """Unread notifications."""
    unseen: int
    """Notifications not yet seen."""
    total: int
    """Notifications in the inbox."""
    seq: int
    """The change these counts are as of (the event's `id:` without its epoch)."""
    views: dict[str, StreamViewCount] | None = None
    """Each of the user's views' (tabs') counts, by name; absent when they have none."""
