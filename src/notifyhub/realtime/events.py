"""The bytes of Server-Sent Events, shared by streams (sse.py) and the hub (hub.py), which
builds a fan-out's notification events straight from its doorbell."""

from __future__ import annotations

from typing import Any

import orjson


def frame(event: str, seq: int, data: Any) -> bytes:
    """One SSE event. orjson escapes every control character, so `data` is one line."""
    return b"event: %s\nid: %d\ndata: %s\n\n" % (event.encode(), seq, orjson.dumps(data))


def notification_frame(seq: int, body: bytes) -> bytes:
    """A `notification` event; `body` is the item's JSON (store/inbox.py item_json)."""
    return b"event: notification\nid: %d\ndata: %s\n\n" % (seq, body)


def counts_data(counts: Any, seq: int) -> dict[str, int]:
    return {
        "unread": counts["unread"],
        "unseen": counts["unseen"],
        "total": counts["total"],
        "seq": seq,
    }


def delivered_frames(body: bytes, seq: int, unread: int, unseen: int, total: int) -> bytes:
    """What a stream sends for a new copy at `seq`: the notification, then the counts after
    it; the same bytes the stream's log read gives (sse.py `_catch_up`)."""
    counts = counts_data({"unread": unread, "unseen": unseen, "total": total}, seq)
    return notification_frame(seq, body) + frame("counts", seq, counts)
