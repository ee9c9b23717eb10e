"""The bytes of Server-Sent Events, shared by streams (sse.py) and the hub (hub.py), which
builds a fan-out's notification events straight from its doorbell; and the one parser of
the event ids clients send back (`Last-Event-ID`, `?last_event_id=`).

An event id is `<seq>-<epoch>`: the user's change seq and the epoch it counts in (a new
one each time Redis lost the user's data and the seq began again at 1; lua/common.lua).
A seq from before epochs existed has epoch '' and its id is the bare seq, as ids were
before; a client echoing one back is resumed only if the user's seq is still of epoch ''.

A stream that sent a broadcast's notification ahead of its copy (an announcement,
realtime/hub.py) adds the notification's id to every id it sends until the copy is in the
log: `<seq>-<epoch>.<ULID>` (at most MAX_AHEAD of them). A client resuming from such an
id gets the copy's change without its `notification` event: it was shown already.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from ulid import ULID

from notifyhub.errors import InvalidInput

MAX_SEQ_DIGITS, MAX_EPOCH_CHARS, ULID_CHARS = 18, 16, 26
MAX_AHEAD = 4
"""Notifications a stream shows ahead of their copies at once; another is not announced."""
MAX_EVENT_ID = MAX_SEQ_DIGITS + 1 + MAX_EPOCH_CHARS + MAX_AHEAD * (1 + ULID_CHARS)
"""The longest id the parser accepts: checked before the regular expression runs."""
_EVENT_ID = re.compile(
    rf"([0-9]{{1,{MAX_SEQ_DIGITS}}})(?:-([0-9a-f]{{1,{MAX_EPOCH_CHARS}}}))?"
    rf"((?:\.[0-9A-HJKMNP-TV-Z]{{{ULID_CHARS}}}){{0,{MAX_AHEAD}}})"
)
"""ASCII digits only (`str.isdigit` and `int` also take '²', '①'), an epoch in hex, then
the ids shown ahead (ULIDs, Crockford's alphabet)."""


@dataclass(frozen=True, slots=True)
class EventId:
    seq: int
    epoch: str
    ahead: tuple[str, ...] = ()
    """Notifications the client was shown ahead of their copies (`announced_frame`)."""


def event_id(seq: int, epoch: str, ahead: Sequence[str] = ()) -> bytes:
    base = b"%d-%s" % (seq, epoch.encode()) if epoch else b"%d" % seq
    if not ahead:
        return base
    return base + b"".join(b"." + nid.encode() for nid in ahead)


def parse_event_id(value: str | None, name: str = "Last-Event-ID") -> EventId | None:
    """The cursor a client resumes from; None when it sent none (or an empty one).

    Anything we cannot have issued is refused (`InvalidInput`, a 422), never guessed at:
    the client's EventSource then stops instead of resuming from a wrong place."""
    if not value:
        return None
    if len(value) > MAX_EVENT_ID:
        raise InvalidInput(f"{name}: at most {MAX_EVENT_ID} characters")
    match = _EVENT_ID.fullmatch(value)
    if match is None:
        raise InvalidInput(
            f"{name}: an event id is `<seq>` or `<seq>-<epoch>` (ASCII), then at most "
            f"{MAX_AHEAD} `.<notification id>`"
        )
    ahead = tuple(match[3].split(".")[1:]) if match[3] else ()
    for nid in ahead:
        try:
            ULID.from_str(nid)
        except ValueError:  # past the largest ULID (its first character above 7)
            raise InvalidInput(f"{name}: {nid} is not a notification id") from None
    return EventId(int(match[1]), match[2] or "", ahead)


def frame(event: str, seq: int, epoch: str, data: Any, ahead: Sequence[str] = ()) -> bytes:
    """One SSE event. orjson escapes every control character, so `data` is one line."""
    return b"event: %s\nid: %s\ndata: %s\n\n" % (
        event.encode(),
        event_id(seq, epoch, ahead),
        orjson.dumps(data),
    )


def data_frame(event: str, seq: int, epoch: str, data: bytes, ahead: Sequence[str] = ()) -> bytes:
    """One SSE event whose `data` is JSON already (one line: orjson escapes controls)."""
    return b"event: %s\nid: %s\ndata: %s\n\n" % (
        event.encode(),
        event_id(seq, epoch, ahead),
        data,
    )


def announced_frame(seq: int, epoch: str, ahead: Sequence[str], body: bytes) -> bytes:
    """A `notification` event sent ahead of its copy: the id is the stream's cursor with
    the notifications shown ahead, this one last (`ahead`)."""
    return b"event: notification\nid: %s\ndata: %s\n\n" % (event_id(seq, epoch, ahead), body)


def notification_frame(seq: int, epoch: str, body: bytes) -> bytes:
    """A `notification` event; `body` is the item's JSON (store/items.py item_json)."""
    return b"event: notification\nid: %s\ndata: %s\n\n" % (event_id(seq, epoch), body)


def counts_data(
    unread: int,
    unseen: int,
    total: int,
    seq: int,
    views: Mapping[str, tuple[int, int, int]] | None = None,
    inexact: Collection[str] = (),
) -> dict[str, object]:
    """The data of a `counts` (or `reset`) event; `views` (name -> unread, unseen, total)
    when the user has any (their counts as the user's copy of the views has them: a
    view's recount after its definition changed comes as a `counts` event of its own),
    those named in `inexact` marked `"exact": false` (being recounted)."""
    data: dict[str, object] = {"unread": unread, "unseen": unseen, "total": total, "seq": seq}
    if views:
        shown: dict[str, dict[str, object]] = {}
        for name, (u, s, t) in views.items():
            shown[name] = {"unread": u, "unseen": s, "total": t}
            if name in inexact:
                shown[name]["exact"] = False
        data["views"] = shown
    return data


def placed_frames(
    body: bytes,
    seq: int,
    epoch: str,
    unread: int,
    unseen: int,
    total: int,
    views: Mapping[str, tuple[int, int, int]] | None = None,
) -> bytes:
    """What a stream sends for a new copy at `seq`: the notification, then the counts after
    it (with the user's views'); the same bytes the stream's log read gives (sse.py
    `_catch_up`)."""
    counts = counts_data(unread, unseen, total, seq, views)
    return notification_frame(seq, epoch, body) + frame("counts", seq, epoch, counts)


_OFFERED_DATA = b'\ndata: {"id":"'
"""Where the notification's id starts in `placed_frames` (the item JSON's first field)."""


_COUNTS_FRAME = b"event: counts\n"


def counts_part(frames: bytes) -> bytes:
    """The `counts` event of `placed_frames`: what a stream that showed the copy's
    notification ahead (announced) still sends."""
    return frames[frames.index(_COUNTS_FRAME) :]


def offered_id(frames: bytes) -> str | None:
    """The id of the notification whose event `placed_frames` made; None if it has none."""
    at = frames.find(_OFFERED_DATA)
    if at < 0:
        return None
    start = at + len(_OFFERED_DATA)
    end = frames.find(b'"', start)
    return frames[start:end].decode() if end > start else None
