"""Quiet hours: a weekly schedule in a user's own time zone during which their e-mails
and Web Pushes wait (issue 41 item 2).

A schedule maps days to one window each, `{"mon-fri": ["22:00", "07:00"], "sun":
["00:00", "24:00"]}`: keys are single days (`mon`..`sun`) or ranges (`mon-fri`; a range
may wrap, `fri-mon`), no day named twice; a window `[start, end]` is local wall time
`HH:MM`; an end at or before its start crosses midnight and belongs to the day it
starts; `24:00` (an end only) is the next midnight. Windows that touch or overlap chain
into one quiet period, so "until" is when the user is no longer quiet at all.

Daylight saving, as a person expects it:
- a wall time that does not exist (the spring gap) moves to the first valid instant
  after it: the moment the clocks jump (`02:30` in Berlin on the last Sunday of March is
  03:00 CEST);
- a wall time that exists twice (the autumn overlap) is its first occurrence when a
  window starts and its second when it ends, so the night is never cut short.

Everything here is pure: the caller passes the instant (a controlled clock in tests).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
"""Day names in `date.weekday()` order."""
_CLOCK = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")
MIDNIGHT_END = "24:00"
MAX_CHAIN = 16
"""Windows one quiet period chains at most (a week of them, with room to spare)."""

Window = tuple[time, time | None]
"""A window's local start and end (None: `24:00`, the next midnight)."""
Weekly = dict[int, Window]
"""A parsed schedule: weekday (0 = Monday) -> its window."""


class InvalidSchedule(ValueError):
    """A schedule that cannot be read; its message names the key and what is wrong."""


@dataclass(frozen=True, slots=True)
class QuietState:
    """Whether a user is quiet at an instant, and until when (UTC; None: not quiet)."""

    quiet: bool
    until: datetime | None = None


NOT_QUIET = QuietState(False)


def parse(schedule: Mapping[str, Sequence[str]]) -> Weekly:
    """The schedule as weekday -> window; InvalidSchedule names the first mistake."""
    weekly: Weekly = {}
    for key, window in schedule.items():
        days = _days(key)
        parsed = _window(key, window)
        for day in days:
            if day in weekly:
                raise InvalidSchedule(f"quiet: {DAYS[day]!r} is named twice (key {key!r})")
            weekly[day] = parsed
    return weekly


def _days(key: str) -> list[int]:
    """The weekdays a key names: `mon`, or a range `mon-fri` (wrapping: `fri-mon`)."""
    first, sep, last = key.partition("-")
    names = (first, last) if sep else (first, first)
    if any(name not in DAYS for name in names):
        raise InvalidSchedule(
            f"quiet: key {key!r} is not a day (mon, tue, wed, thu, fri, sat, sun) "
            "or a range of them (mon-fri)"
        )
    start, end = DAYS.index(names[0]), DAYS.index(names[1])
    return [(start + i) % 7 for i in range((end - start) % 7 + 1)]


def _window(key: str, window: Sequence[str]) -> Window:
    if isinstance(window, str) or len(window) != 2:
        raise InvalidSchedule(f"quiet: {key!r} must be [start, end], two times as HH:MM")
    start, end = window
    if end == MIDNIGHT_END:
        return _clock(key, start), None
    begins, ends = _clock(key, start), _clock(key, end)
    if begins == ends:
        raise InvalidSchedule(
            f"quiet: {key!r} starts and ends at {start}: an empty window "
            '(a whole day is ["00:00", "24:00"])'
        )
    return begins, ends


def _clock(key: str, value: object) -> time:
    found = _CLOCK.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise InvalidSchedule(
            f"quiet: {key!r} has {value!r}, not a time as HH:MM (00:00 to 23:59; 24:00 as an end)"
        )
    return time(int(found[1]), int(found[2]))


def state(weekly: Weekly, zone: zoneinfo.ZoneInfo, now: datetime) -> QuietState:
    """Whether `now` (aware) falls in a window of `weekly` in `zone`, and when the quiet
    period it is in ends (chained windows: the end of the last)."""
    current = now.astimezone(UTC)
    until: datetime | None = None
    for _ in range(MAX_CHAIN):
        end = _window_end_at(weekly, zone, current)
        if end is None:
            break
        until = current = end
    return NOT_QUIET if until is None else QuietState(True, until)


def _window_end_at(weekly: Weekly, zone: zoneinfo.ZoneInfo, instant: datetime) -> datetime | None:
    """The latest end of the windows holding `instant` (None: none does)."""
    today = instant.astimezone(zone).date()
    ends = [
        end
        for day in (today - timedelta(days=1), today)
        if (span := _span(weekly, zone, day)) is not None
        for start, end in (span,)
        if start <= instant < end
    ]
    return max(ends, default=None)


def _span(weekly: Weekly, zone: zoneinfo.ZoneInfo, day: date) -> tuple[datetime, datetime] | None:
    """The UTC instants of the window starting on `day` (None: no window that day)."""
    window = weekly.get(day.weekday())
    if window is None:
        return None
    start, end = window
    next_day = day + timedelta(days=1)
    if end is None:
        end_at = datetime.combine(next_day, time())
    else:
        end_at = datetime.combine(next_day if end <= start else day, end)
    return instant(datetime.combine(day, start), zone, "start"), instant(end_at, zone, "end")


def instant(wall: datetime, zone: zoneinfo.ZoneInfo, role: Literal["start", "end"]) -> datetime:
    """The UTC instant of the naive wall time `wall` in `zone`: in a gap, the moment the
    clocks jump; in an overlap, the first occurrence for a start, the second for an end."""
    fold = 0 if role == "start" else 1
    local = wall.replace(tzinfo=zone, fold=fold)
    found = local.astimezone(UTC)
    if found.astimezone(zone).replace(tzinfo=None) == wall:
        return found
    return _jump(wall, zone)


def _jump(wall: datetime, zone: zoneinfo.ZoneInfo) -> datetime:
    """The instant the clocks jump over the gap holding `wall`: the first whose offset is
    the one after the gap, found between the wall time read with either offset."""
    a = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    b = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    low, high = min(a, b), max(a, b)
    after = _offset(high, zone)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(middle, zone) == after:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def _offset(seconds: int, zone: zoneinfo.ZoneInfo) -> timedelta | None:
    return datetime.fromtimestamp(seconds, UTC).astimezone(zone).utcoffset()


def zone_of(name: str | None) -> zoneinfo.ZoneInfo:
    """The zone named (None, or one this tz database lost: UTC)."""
    if name:
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    return zoneinfo.ZoneInfo("UTC")
