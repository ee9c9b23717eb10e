"""A user's copy of a notification as JSON: shared content joined with the user's state."""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson

from notifyhub.domain.notification import InboxItem, from_ms, to_rfc3339

FLAGS = b"\x1f"
"""Where a state's flags start (lua/common.lua `format_state`): `a` archived, `p` pinned,
`s<ms>` snoozed until then, `v<mask>` the views the copy is in (not shown), `r<ms>`
resurfaced then, `c<k>@<ms>` its k-th action completed then."""

_SNOOZED = re.compile(rb"s(\d+)")
_COMPLETED = re.compile(rb"c(\d+)@(\d+)")


def _item_fields(content: bytes, state: bytes) -> dict[str, Any]:
    """Join shared content and a user's `read_at_ms|seen|category|collapse_key` state
    (and its flags, when it has any)."""
    read_at_ms, seen, rest = state.split(b"|", 2)
    flags = rest.partition(FLAGS)[2]
    read_at = int(read_at_ms)
    fields: dict[str, Any] = orjson.loads(content)
    thread = fields.pop("thread", None)  # a thread's summary (lua/common.lua `join`)
    if thread is not None:
        latest, fields["id"] = fields["id"], thread["id"]  # the content is its latest activity's
        fields["thread"] = {
            "key": thread["key"],
            "latest_id": latest,
            "activity_count": thread["count"],
            "actors": thread["actors"],
            "first_at": to_rfc3339(from_ms(thread["first_ms"])),
            "last_at": to_rfc3339(from_ms(thread["last_ms"])),
        }
    else:
        fields["thread"] = None
    fields.setdefault("tags", [])  # content stored before tags existed
    fields.setdefault("body_format", "text")  # (stored only when markdown)
    fields.setdefault("thread_key", None)  # (stored only when set)
    fields.setdefault("thread_window_s", None)
    fields["status"] = "read" if read_at else "unread"
    fields["seen"] = seen == b"1"
    fields["read_at"] = to_rfc3339(from_ms(read_at)) if read_at else None
    fields["archived"] = b"a" in flags
    fields["pinned"] = b"p" in flags
    snoozed = _SNOOZED.search(flags) if flags else None
    fields["snoozed_until"] = to_rfc3339(from_ms(int(snoozed[1]))) if snoozed else None
    actions = fields.setdefault("actions", [])  # content without actions stores none
    done = _COMPLETED.search(flags) if actions else None
    fields["completed"] = completion(actions, int(done[1]), int(done[2])) if done else None
    return fields


def completion(actions: list[dict[str, Any]], index: int, at_ms: int) -> dict[str, Any] | None:
    """A copy's completed action as items show it: its id (the `index`-th, from 1) and
    when; None when the content has no such action."""
    if not 1 <= index <= len(actions):
        return None
    return {"action": actions[index - 1]["id"], "completed_at": to_rfc3339(from_ms(at_ms))}


def parse_item(content: bytes, state: bytes) -> InboxItem:
    return InboxItem.model_validate(_item_fields(content, state))


def item_json(
    content: bytes, state: bytes, *, replaces: str | None = None, resurfaced: bool = False
) -> bytes:
    """A user's copy as JSON, straight from Redis bytes (the stream's hot path)."""
    return _item_json(content, state, replaces, resurfaced)


@functools.lru_cache(maxsize=1024)
def _item_json(content: bytes, state: bytes, replaces: str | None, resurfaced: bool) -> bytes:
    """Cached: a broadcast sends every stream the same content with the same fresh
    state, so 10k streams cost one parse and one dump instead of 10k."""
    fields = _item_fields(content, state)
    if replaces is not None:
        fields["replaces"] = replaces
    if resurfaced:
        fields["resurfaced"] = True
    return orjson.dumps(fields)
