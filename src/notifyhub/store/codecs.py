"""The inbox scripts' calling conventions: one encoder per script's ARGV (named fields,
`to_args()`) and one decoder per reply (`from_reply()`), so no caller counts positions.

Each class lists its fields in the order of the script's header comment (lua/*.lua).
tests/integration/test_script_layouts.py calls every script on real Redis with known
input and decodes the reply, so a layout that shifts on either side fails there.
The fan-out's replies stay flat lists (`PerUser`): a 100k fan-out builds no object per
user to decode them.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

import orjson

from notifyhub.store.changes import Change, Changes, ViewCounts, decode_entry, view_counts

Arg = str | bytes | int
Args = list[Arg]


def _tristate(value: bool | None) -> str:
    """'1', '0', or '' for unchanged."""
    return "" if value is None else ("1" if value else "0")


def _flag(value: bool) -> str:
    """A Lua-side boolean: '1' or ''."""
    return "1" if value else ""


def _next_expiry(raw: Any) -> int | None:
    """A `next_expiry` reply (a score as a string, or false) in ms."""
    return int(float(raw)) if raw else None


@dataclass(frozen=True, slots=True)
class PlaceTail:
    """place.lua's optional ARGV tail, for standalone Redis only (on a Cluster the keys
    and the channel it names may live on other nodes): `indexed`, the call's last two
    KEYS are the notification's recipient index and the expiry index, which the script
    writes before the copies (three commands fewer for redis-py to pack and read per
    publish);
    `channels` (each user's doorbell channel), the script PUBLISHes the doorbell with
    each copy's event itself, one message per channel, its `header` carrying the fresh
    item's JSON."""

    members: Sequence[str]
    """`tenant/user` of each user, in KEYS order."""
    indexed: bool
    channels: Sequence[str] = ()
    """Empty: no doorbell."""
    header: bytes = b""


@dataclass(frozen=True, slots=True)
class ThreadArgs:
    """A threaded notification's part of `CopyArgs` (lua/common.lua `join`)."""

    key: str
    window_ms: int
    created_ms: int
    actor: bytes
    """"<actor id>\t<actor JSON>", or empty."""


@dataclass(frozen=True, slots=True)
class CopyArgs:
    """A notification as lua/common.lua `copy` takes it: place.lua's ARGV, and (all but
    the content) the header of a pending entry that defer.lua stores and `place_pending` reads."""

    id: str
    content: bytes
    category: str
    collapse_key: str
    expires_ms: int
    log_max: int
    critical: bool
    pull: bool
    """Stored without a live `notification` event (counts still update)."""
    items_per_user: int
    """0: no cap."""
    severity: int = 1
    """Its severity's rank (lua/common.lua RANK: info 1 ... critical 5)."""
    tags: Sequence[str] = ()
    """With the category and severity: which of each user's views the copy is in."""
    tenant_views: int | None = None
    """The version of the tenant's views `tenant_mask` was evaluated against (None: not
    evaluated; every user's views are then evaluated in Lua)."""
    tenant_mask: int = 0
    """Which of the tenant's views (at that version) the notification is in."""
    thread: ThreadArgs | None = None
    """Set when it has a thread key (lua/common.lua `join`)."""
    arrived_ms: int = 0
    """When its copies arrive, if later than its id's time: a scheduled notification's
    delivery (its id was made at its acceptance). They sort by it, as a copy back from a
    snooze sorts by its return (lua/common.lua `sort_key`); 0: by their id."""

    def place_args(self, tail: PlaceTail | None = None) -> Args:
        args: Args = [self.id, self.content, self.category, self.collapse_key, self.expires_ms]
        args += [self.log_max, _flag(self.critical), _flag(self.pull), self.items_per_user]
        version = "" if self.tenant_views is None else self.tenant_views
        args += [self.severity, ",".join(self.tags), version, self.tenant_mask]
        t = self.thread
        args += ["", 0, 0, ""] if t is None else [t.key, t.window_ms, t.created_ms, t.actor]
        args.append(self.arrived_ms)
        if tail is not None:
            args += [_flag(tail.indexed), _flag(bool(tail.channels)), tail.header, *tail.members]
            args += tail.channels
        return args

    def defer_args(self) -> Args:
        """defer.lua's ARGV: the pending entry ("<header JSON>\\n<content>"), category,
        critical."""
        header = [self.id, self.category, self.collapse_key, self.expires_ms, self.log_max]
        header += [int(self.critical), int(self.pull), self.items_per_user]
        version = -1 if self.tenant_views is None else self.tenant_views
        header += [self.severity, ",".join(self.tags), version, self.tenant_mask]
        if (t := self.thread) is not None:
            header += [t.key, t.window_ms, t.created_ms, t.actor.decode()]
        if self.arrived_ms:  # after the thread's four (absent from most entries)
            if t is None:
                header += ["", 0, 0, ""]
            header.append(self.arrived_ms)
        entry = orjson.dumps(header) + b"\n" + self.content
        return [entry, self.category, _flag(self.critical)]


@dataclass(frozen=True, slots=True)
class PerUser:
    """A batch script's reply: `WIDTH` values per user, flat, then the evictions in all."""

    WIDTH: ClassVar[int] = 1
    values: list[Any]
    evicted: int

    @classmethod
    def from_reply(cls, raw: list[Any]) -> Self:
        values = list(raw)
        evicted = values.pop()
        return cls(values, int(evicted))

    @classmethod
    def from_slot_replies(cls, user_slots: Sequence[int], replies: Sequence[list[Any]]) -> Self:
        """Several Cluster slots' replies (one per distinct slot, in first-seen order), in
        the callers' user order (`user_slots`: each user's slot)."""
        width = cls.WIDTH
        slots = dict.fromkeys(user_slots)
        parts = {slot: cls.from_reply(r) for slot, r in zip(slots, replies, strict=True)}
        rest = {slot: iter(part.values) for slot, part in parts.items()}
        values = [v for slot in user_slots for v in itertools.islice(rest[slot], width)]
        return cls._merged(values, user_slots, parts)

    @classmethod
    def _merged(cls, values: list[Any], user_slots: Sequence[int], parts: dict[int, Self]) -> Self:
        """The merged reply of `from_slot_replies` (`parts`: each slot's own, parsed)."""
        return cls(values, sum(part.evicted for part in parts.values()))

    @property
    def firsts(self) -> list[int]:
        """The first value of each user (place: the seq; defer: the pending count)."""
        return self.values[:: self.WIDTH]

    @property
    def dropped(self) -> list[int]:
        """Per user, the oldest notifications their full inbox dropped (none here)."""
        return [0] * (len(self.values) // self.WIDTH)


@dataclass(frozen=True, slots=True)
class Deferred(PerUser):
    """defer.lua's reply: per user its pending list's length (-1: preferences drop the
    category), then 0 (a pending copy evicts when it places)."""


@dataclass(frozen=True, slots=True)
class PushedOut:
    """What one copy pushed out of its user's inbox."""

    replaced: str | None
    """The id of the copy with the same collapse key it replaced."""
    evicted: tuple[str, ...]
    """The ids of the oldest notifications its full inbox dropped for it."""


@dataclass(frozen=True, slots=True)
class Placed(PerUser):
    """place.lua's reply: per user seq (0: had it; -1: preferences drop it), dropped
    (evictions after that seq), unread, unseen, total (after the copy), epoch, and
    whether the user has views (1: their counts are only in the log entry); then what
    copies pushed out (`pushed_out`: by the user's position)."""

    WIDTH: ClassVar[int] = 7
    pushed_out: dict[int, PushedOut] = field(default_factory=dict)

    @classmethod
    def from_reply(cls, raw: list[Any]) -> Self:
        values = list(raw)
        evicted, count = values.pop(), int(values.pop())
        lines = values[len(values) - count :]
        del values[len(values) - count :]
        return cls(values, int(evicted), dict(map(_pushed_out, lines)))

    @classmethod
    def _merged(cls, values: list[Any], user_slots: Sequence[int], parts: dict[int, Self]) -> Self:
        """`PerUser`'s, with each slot's positions of what copies pushed out made the
        callers'."""
        callers: dict[int, list[int]] = {slot: [] for slot in parts}
        for i, slot in enumerate(user_slots):
            callers[slot].append(i)
        pushed = {
            callers[slot][i]: out
            for slot, part in parts.items()
            for i, out in part.pushed_out.items()
        }
        return cls(values, sum(part.evicted for part in parts.values()), pushed)

    @property
    def dropped(self) -> list[int]:
        return self.values[1 :: self.WIDTH]

    def copies(self) -> Iterator[tuple[int, int, int, int, int, bytes, int]]:
        """(seq, dropped, unread, unseen, total, epoch, has_views) per user."""
        v, w = self.values, self.WIDTH
        return zip(v[0::w], v[1::w], v[2::w], v[3::w], v[4::w], v[5::w], v[6::w], strict=True)


def _pushed_out(line: bytes | str) -> tuple[int, PushedOut]:
    """`<position from 1> <replaced id or ''>[ <evicted id>...]` (place.lua)."""
    text = line.decode() if isinstance(line, bytes) else line
    position, replaced, *evicted = text.split(" ")
    return int(position) - 1, PushedOut(replaced or None, tuple(evicted))


PLACED_WIDTH = Placed.WIDTH
"""Values place.lua returns per user."""
UNSNOOZE = 0
"""mark.lua's snooze time that ends a snooze (and what logged `MarkOp`s keep for it):
never a user's time, which the inbox refuses unless it is in the future."""


@dataclass(frozen=True, slots=True)
class MarkArgs:
    """mark.lua's ARGV."""

    log_max: int
    read: bool | None
    """True: read; False: unread; None: unchanged."""
    seen: bool
    ids: Sequence[str]
    archived: bool | None = None
    """True: archive; False: unarchive; None: unchanged."""
    pinned: bool | None = None
    """True: pin; False: unpin; None: unchanged."""
    pin_max: int = 0
    """A pin that would make more pinned items than this is refused (code 3)."""
    snooze_until_ms: int | None = None
    """Snooze until then (ms); `UNSNOOZE` unsnoozes; None: unchanged."""

    def to_args(self) -> Args:
        flags = [_tristate(self.read), _flag(self.seen), _tristate(self.archived)]
        snooze = "" if self.snooze_until_ms is None else self.snooze_until_ms
        return [self.log_max, *flags, _tristate(self.pinned), self.pin_max, snooze, *self.ids]


@dataclass(frozen=True, slots=True)
class ResurfaceArgs:
    """resurface.lua's ARGV; its reply is {seq} (0: nothing to do)."""

    log_max: int
    id: str
    until_ms: int

    def to_args(self) -> Args:
        return [self.log_max, self.id, self.until_ms]


@dataclass(frozen=True, slots=True)
class ActArgs:
    """act.lua's ARGV."""

    log_max: int
    id: str
    index: int
    """The action's place in the content's `actions`, from 1."""
    action: str
    at_ms: int | None = None
    """When it was completed (a replay); None: now."""
    activity: str = ""
    """A thread's: the activity whose actions were shown ('' none)."""

    def to_args(self) -> Args:
        at = "" if self.at_ms is None else self.at_ms
        return [self.log_max, self.id, self.index, self.action, at, self.activity]


@dataclass(frozen=True, slots=True)
class Acted:
    """act.lua's reply: the seq of its `update` (0 when nothing changed), a code (0 missing,
    1 already completed, 2 completed now, 3 a thread shows another activity now) and the
    completion, (index, ms) (of the first, when already completed; None otherwise)."""

    seq: int
    code: int
    done: tuple[int, int] | None

    @classmethod
    def from_reply(cls, raw: list[Any]) -> Acted:
        done = raw[2].decode() if isinstance(raw[2], bytes) else str(raw[2])
        index, _, at = done.partition("@")
        return cls(int(raw[0]), int(raw[1]), (int(index), int(at)) if done else None)


@dataclass(frozen=True, slots=True)
class Marked:
    """mark.lua's reply: the last seq, and per id 0 missing, 1 unchanged, 2 changed,
    3 refused (the pin limit)."""

    seq: int
    codes: list[int]

    @classmethod
    def from_reply(cls, raw: list[Any]) -> Marked:
        return cls(int(raw[0]), [int(c) for c in raw[1]])


@dataclass(frozen=True, slots=True)
class MarkAllArgs:
    """mark_all.lua's ARGV ('' for no category, no bound, no view)."""

    log_max: int
    category: str | None
    before_id: str | None
    action: Literal["read", "archive"] = "read"
    view: str | None = None
    """Only the copies in this view of the user's (by their view bits, as its list)."""
    view_line: str | None = None
    """Only the copies this view definition holds (a replay: evaluated on content)."""

    def to_args(self) -> Args:
        view, line = self.view or "", self.view_line or ""
        return [self.log_max, self.category or "", self.before_id or "", self.action, view, line]


@dataclass(frozen=True, slots=True)
class MarkedAll:
    seq: int
    updated: int
    view_line: str = ""
    """The named view's definition line as the user had it ('' none named, or unknown)."""

    @classmethod
    def from_reply(cls, raw: list[Any]) -> MarkedAll:
        line = raw[2] if len(raw) > 2 else b""
        return cls(int(raw[0]), int(raw[1]), line.decode() if isinstance(line, bytes) else line)


@dataclass(frozen=True, slots=True)
class RemoveArgs:
    """remove.lua's ARGV."""

    log_max: int
    ids: Sequence[str]

    def to_args(self) -> Args:
        return [self.log_max, *self.ids]


@dataclass(frozen=True, slots=True)
class Dropped:
    """remove.lua's and purge.lua's reply: the seq, how many items went, and the user's
    next expiry (ms) if any item is left."""

    seq: int
    dropped: int
    next_expiry_ms: int | None

    @classmethod
    def from_reply(cls, raw: list[Any]) -> Dropped:
        return cls(int(raw[0]), int(raw[1]), _next_expiry(raw[2]))


@dataclass(frozen=True, slots=True)
class LogMaxArgs:
    """The ARGV of purge.lua and counts.lua: only the change log's bound."""

    log_max: int

    def to_args(self) -> Args:
        return [self.log_max]


@dataclass(frozen=True, slots=True)
class GetArgs:
    """get.lua's ARGV."""

    log_max: int
    id: str

    def to_args(self) -> Args:
        return [self.log_max, self.id]


@dataclass(frozen=True, slots=True)
class Found:
    """get.lua's reply when the item exists: its content and the user's state of it."""

    content: bytes
    state: bytes

    @classmethod
    def from_reply(cls, raw: list[Any] | None) -> Found | None:
        return cls(raw[0], raw[1]) if raw else None


@dataclass(frozen=True, slots=True)
class Counted:
    """counts.lua's reply."""

    unread: int
    unseen: int
    total: int
    seq: int
    epoch: str
    tenant_views: int = -1
    """The version of the tenant's views the user's view counts follow (-1: never synced)."""
    personal_views: int = -1
    """The version of the user's own views they follow (-1: never synced)."""
    views: dict[str, ViewCounts] | None = None
    """Per view (the user's, as synced): its counts; None when the user has none."""

    @classmethod
    def from_reply(cls, raw: list[Any]) -> Counted:
        unread, unseen, total, seq, epoch, tenant_views, personal_views, names, counters = raw
        return cls(
            int(unread),
            int(unseen),
            int(total),
            int(seq),
            sys.intern(epoch.decode()),
            int(tenant_views),
            int(personal_views),
            view_counts(names.decode(), counters.decode()) if names else None,
        )


@dataclass(frozen=True, slots=True)
class ViewsArgs:
    """views.lua's ARGV: the tenant's and the user's view definitions, each with its
    version (lines: store/views.py `view_lines`)."""

    log_max: int
    tenant_version: int
    tenant_lines: str
    personal_version: int
    personal_lines: str

    def to_args(self) -> Args:
        return [
            self.log_max,
            self.tenant_version,
            self.tenant_lines,
            self.personal_version,
            self.personal_lines,
        ]


@dataclass(frozen=True, slots=True)
class Synced:
    """views.lua's reply: the seq of its `views` change (0: nothing changed) and the
    versions the user follows now."""

    seq: int
    tenant_version: int
    personal_version: int

    @classmethod
    def from_reply(cls, raw: list[Any]) -> Synced:
        return cls(int(raw[0]), int(raw[1]), int(raw[2]))


@dataclass(frozen=True, slots=True)
class PageArgs:
    """page.lua's ARGV."""

    log_max: int
    order: Literal["asc", "desc"]
    bound: str
    """ZRANGEBYLEX form: `[id`, `(id`, `+`."""
    limit: int
    status: Literal["all", "unread", "read", "archived", "snoozed"]
    category: str | None
    budget: int
    """At most this many ids scanned."""
    stop: str = ""
    """ZRANGEBYLEX form: where the scan ends ('' for the end of its order)."""
    pinned: Literal["first", "skip", "only", "none", ""] = ""
    """'first': pinned items lead the list and count in `limit`; 'skip': left out (the
    pages past them); 'only': nothing else; 'none': only unpinned items; '': in time
    order with the rest."""
    tags_any: Sequence[str] = ()
    tags_all: Sequence[str] = ()
    severity_min: int = 0
    """Severity rank (lua/page.lua RANK: info 1 ... critical 5); 0 any."""
    actor: str | None = None
    view: str | None = None
    """Only the copies in this view of the user's."""
    pin_after: str = ""
    """With 'first': only the pinned items sorting below this ULID (a `pin.` cursor's)."""

    def to_args(self) -> Args:
        args: Args = [self.log_max, self.order, self.bound, self.limit, self.status]
        stop = self.stop or ("-" if self.order == "desc" else "+")
        filters: Args = [",".join(self.tags_any), ",".join(self.tags_all), self.severity_min]
        return [
            *args,
            self.category or "",
            self.budget,
            stop,
            self.pinned,
            *filters,
            self.actor or "",
            self.view or "",
            self.pin_after,
        ]


@dataclass(frozen=True, slots=True)
class Paged:
    """page.lua's reply: the next cursor (None: the end), the unread count, and
    (id, content, state) per item."""

    next_cursor: str | None
    unread: int
    rows: list[tuple[bytes, bytes, bytes]]

    @classmethod
    def from_reply(cls, raw: list[Any]) -> Paged:
        rows = [(raw[i], raw[i + 1], raw[i + 2]) for i in range(2, len(raw), 3)]
        return cls(raw[0].decode() if raw[0] else None, int(raw[1]), rows)


@dataclass(frozen=True, slots=True)
class ChangesArgs:
    """changes.lua's ARGV."""

    after_seq: int
    max_entries: int
    max_bytes: int

    def to_args(self) -> Args:
        return [self.after_seq, self.max_entries, self.max_bytes]


def changes_from_reply(raw: list[Any]) -> Changes:
    """changes.lua's reply: seq, oldest logged seq, epoch, then per entry its JSON, the
    item's content and state (false unless a notification whose item still exists)."""
    entries = [
        Change(decode_entry(raw[i]), raw[i + 1] or None, raw[i + 2] or None)
        for i in range(3, len(raw), 3)
    ]
    return Changes(int(raw[0]), int(raw[1]), sys.intern(raw[2].decode()), entries)
