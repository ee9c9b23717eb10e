"""Per-user inboxes in Redis: every change is one atomic Lua call per user (or batch)."""

from __future__ import annotations

from notifyhub.store.inbox.announcing import Announcing
from notifyhub.store.inbox.base import TenantUsers, UserRef
from notifyhub.store.inbox.changing import Changing
from notifyhub.store.inbox.copies import arrival_ms, arriving_now
from notifyhub.store.inbox.placing import (
    INLINE_MIN_USERS,
    PENDING_PLACE_AT,
    SHARED_MAX_PLACEMENTS,
    Placement,
    Placing,
)
from notifyhub.store.inbox.reading import (
    PIN_CURSOR,
    ChangeRead,
    ListStatus,
    PageQuery,
    Position,
    Reading,
)

__all__ = [
    "INLINE_MIN_USERS",
    "PENDING_PLACE_AT",
    "PIN_CURSOR",
    "SHARED_MAX_PLACEMENTS",
    "ChangeRead",
    "InboxStore",
    "ListStatus",
    "PageQuery",
    "Placement",
    "Position",
    "TenantUsers",
    "UserRef",
    "arrival_ms",
    "arriving_now",
]


class InboxStore(Placing, Announcing, Reading, Changing):
    """Reads and writes of users' inboxes, and the Pub/Sub doorbell after each change:
    one object made of a part per concern, each method in its part's file (`Placing`
    takes the constructor's arguments).

        placing.py      a publish's copies written (place, defer, place_pending), rung
        announcing.py   a broadcast announced to its streams before its copies exist
        reading.py      pages, items, counts, thread activities, change-log reads
        changing.py     a user's changes to placed copies (mark, act, remove, recall, ...)
        base.py         what the parts share (clients, keys, limits, scripts, doorbells)
        copies.py       what a copy is made of (content, fresh state, inline event)
    """
