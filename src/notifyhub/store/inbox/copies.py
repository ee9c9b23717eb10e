"""What a notification's copies are made of: their content, fresh state and live event."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
from ulid import ULID

from notifyhub.domain.notification import DEFAULT_THREAD_WINDOW_S, Notification, to_ms
from notifyhub.store.codecs import ThreadArgs
from notifyhub.store.items import item_json

FRESH_STATE = b"0|0||"
"""A new copy's state (unread, unseen, no category, no collapse key): lua/common.lua."""


def copy_content(notification: Notification) -> tuple[bytes, ThreadArgs | None]:
    """What each copy stores as its content, and its thread's part of `CopyArgs`: a
    threaded notification's content is its activity's own (lua/common.lua `copy` puts the
    thread's summary before it in the thread item)."""
    n = notification
    content = n.content_json()
    if not n.thread_key:
        return content, None
    created_ms = int(n.created_at.timestamp() * 1000)
    window_s = n.thread_window_s or DEFAULT_THREAD_WINDOW_S
    line = b""
    if n.actor is not None:
        line = n.actor.id.encode() + b"\t" + orjson.dumps(n.actor.model_dump(mode="json"))
    return content, ThreadArgs(n.thread_key, window_s * 1000, created_ms, line)


def is_inlinable(n: Notification, *, pull: bool) -> bool:
    """Whether every copy's live event is the notification as it stands, so a doorbell
    may carry it inline: no category that preferences may silence, no collapse key, no
    thread, not `pull`."""
    return not (pull or n.category or n.collapse_key or n.thread_key)


def fresh_item(content: bytes) -> bytes:
    """A fresh copy's item JSON, as the doorbells of a placement or an announcement carry
    it after their mark (store/doorbells.py)."""
    return item_json(content, FRESH_STATE)


def arrival_ms(notification: Notification) -> int:
    """When the copies of a notification the hub made (services/ingest.py) arrive, as
    `Placing.placement` takes it: its `created_at`, when in a later ms than its id's time.
    That is a scheduled one's (its id was made at its acceptance, it is created at its
    delivery) and a fan-out batch's written after the notification's ms (`arriving_now`);
    any other's id is made of its creation's ms: 0, its copies sort by the id."""
    try:
        id_ms = ULID.from_str(notification.id).milliseconds
    except ValueError:  # not a ULID: sorted by its id, as it always was
        return 0
    created_ms = to_ms(notification.created_at)
    return created_ms if created_ms > id_ms else 0


def arriving_now(notification: Notification) -> Notification:
    """`notification` created now, when now is a later ms than its `created_at`: as a
    deferred fan-out's batch writes its copies, seconds after the 202 (services/
    fanouts.py), or a fan-out's later batch inside its POST (services/ingest.py). Its
    copies then sort by that ms (`arrival_ms`) and show it as their `created_at`, so a
    `since` poller that moved past the notification's time before the batch was written
    gets it, once: its next `since`, that `created_at`, leaves it."""
    now = datetime.now(UTC)
    if to_ms(now) <= to_ms(notification.created_at):
        return notification
    return notification.model_copy(update={"created_at": now})
