"""The event stream's token and the data of its events: `notification`, `update`,
`delete`, `counts` and `reset`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from notifyhub.api.schemas.common import (
    TIME_EXAMPLE,
    ULID_EXAMPLE,
    Documented,
    Instant,
    Timestamp,
    examples,
)
from notifyhub.domain.notification import ITEM_EXAMPLE, Completed, InboxItem


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
    expires_at: Instant
    """When it stops being accepted (60 s after minting by default)."""


_THREAD_EXAMPLE: dict[str, Any] = {
    **ITEM_EXAMPLE,
    "title": "Ana commented on your post",
    "body": "Looks great",
    "severity": "info",
    "category": "comment",
    "source": "blog",
    "display": "both",
    "data": {"post": "p1"},
    "action_url": "https://blog.example/posts/p1#comments",
    "actor": {"type": "user", "id": "ana", "name": "Ana Lima", "avatar_url": None},
    "target": {"type": "post", "id": "p1"},
    "expires_at": "2026-12-20T09:15:02.113Z",
    "tags": ["comments"],
    "thread_key": "post:p1:comments",
    "thread_window_s": None,
    "thread": {
        "key": "post:p1:comments",
        "latest_id": "01JD3Q5A2B3C4D5E6F7G8H9J0K",
        "activity_count": 2,
        "actors": [
            {"type": "user", "id": "ana", "name": "Ana Lima", "avatar_url": None},
            {"type": "user", "id": "bo", "name": None, "avatar_url": None},
        ],
        "first_at": "2026-11-20T09:10:40.020Z",
        "last_at": TIME_EXAMPLE,
    },
}
"""A thread's `update`: the whole item, as it is after an activity joined it."""


class StreamNotification(InboxItem):
    """The data of a `notification` event: the user's copy, as `GET
    /v1/me/notifications/{id}` answers it, and what brought it (a new copy, one replacing
    another, or a snoozed one back)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                ITEM_EXAMPLE,
                {**ITEM_EXAMPLE, "collapse_key": "a-12", "replaces": "01JD3Q5A2B3C4D5E6F7G8H9J0K"},
                {**ITEM_EXAMPLE, "resurfaced": True},
            ]
        }
    )

    replaces: str | None = None
    """Present when it replaced the copy with the same `collapse_key`: that copy's id (it
    left the inbox: swap it in place; no `delete` is sent for it)."""
    resurfaced: bool = False
    """Present, and true, when it is a snoozed copy whose time came (unread again, on top),
    not a new one."""


_STATE_EXAMPLE: dict[str, Any] = {
    "id": ULID_EXAMPLE,
    "status": "read",
    "seen": True,
    "read_at": TIME_EXAMPLE,
    "archived": False,
    "pinned": False,
    "snoozed_until": None,
}
"""A state `update`: a notification read."""


class _StreamState(Documented):
    """What every `update` event's data carries: the item's state (`StreamUpdate`)."""

    model_config = examples(
        _STATE_EXAMPLE,
        {**_STATE_EXAMPLE, "completed": {"action": "approve", "completed_at": TIME_EXAMPLE}},
        _THREAD_EXAMPLE,
    )

    id: str
    """The notification's id."""
    status: Literal["unread", "read"]
    """Its status now."""
    seen: bool
    """Whether it is seen now."""
    read_at: Timestamp | None
    """When it was read; null when unread."""
    archived: bool = False
    """Whether it is archived now (out of the default list and the counts)."""
    pinned: bool = False
    """Whether it is pinned now."""
    snoozed_until: Timestamp | None = None
    """Until when it is snoozed now (out of the default list and the counts); null when
    not snoozed."""
    completed: Completed | None = None
    """Present in the update of an action's completion (which, and when) and in a
    thread's (the item's); other updates leave it out: it is as it was."""


def _item_field(field: FieldInfo) -> Any:
    """One of the item's fields as an `update` has it: present only in a thread's."""
    annotation: Any = field.annotation
    return annotation | None, Field(None, description=field.description)


StreamUpdate = create_model(
    "StreamUpdate",
    __base__=_StreamState,
    __doc__="""The data of an `update` event: a notification's state changed (read, seen,
archived, pinned, snoozed, an action completed; a bulk change sends one per item), or an
activity joined its thread. A state change carries the state only; a thread's (`thread`
set) carries the whole item as it now is, as `GET /v1/me/notifications/{id}` answers it
(unread again, on top, showing the latest activity): every field below is then present.""",
    **{
        name: _item_field(field)
        for name, field in InboxItem.model_fields.items()
        if name not in _StreamState.model_fields
    },
)


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
