"""Bodies of quiet hours: a weekly schedule (services/quiet.py), a tenant's default, and
a user's quiet hours as they apply now."""

from __future__ import annotations

import functools
import zoneinfo
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from notifyhub.api.schemas.common import Documented, Instant, Strict, examples
from notifyhub.services import quiet

SCHEDULE_EXAMPLE = {"mon-fri": ["22:00", "07:00"], "sat-sun": ["23:00", "09:00"]}


@functools.cache
def _zones() -> frozenset[str]:
    """The tz database's zone names (read once, about 30 ms), less `localtime`: a copy
    of the hub host's own zone, which differs from host to host."""
    return frozenset(zoneinfo.available_timezones() - {"localtime"})


def _known_zone(name: str) -> str:
    """The name, if it is one of the tz database's zones: not a folder of it
    (`America`), a data file (`zone.tab`), `posixrules` or a `right/` leap-second copy,
    which `ZoneInfo` opens or fails on in ways of their own."""
    if name not in _zones():
        raise ValueError(f"unknown time zone {name!r}: an IANA name such as Europe/Lisbon")
    return name


TimeZone = Annotated[
    str,
    Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$"),
    AfterValidator(_known_zone),
]
"""An IANA time zone name (`Europe/Lisbon`, `UTC`) this hub's tz database knows: a
user's, and a tenant's default for users who gave none."""


def _valid(schedule: dict[str, list[str]]) -> dict[str, list[str]]:
    quiet.parse(schedule)  # InvalidSchedule is a ValueError: a 422 naming the mistake
    return schedule


QuietSchedule = Annotated[
    dict[
        Annotated[str, Field(max_length=32)],
        Annotated[list[Annotated[str, Field(max_length=5)]], Field(min_length=2, max_length=2)],
    ],
    Field(max_length=7),
    AfterValidator(_valid),
]
"""A weekly schedule: day (`mon`..`sun`) or day range (`mon-fri`) -> `[start, end]` as
local `HH:MM`; an end at or before its start crosses midnight (the window belongs to the
day it starts); `24:00` ends at the next midnight; no day named twice; `{}`: none."""


class QuietDefaultsIn(Strict):
    """A tenant's default quiet hours, for users with no schedule of their own."""

    model_config = examples({"schedule": SCHEDULE_EXAMPLE, "time_zone": "Europe/Berlin"})

    schedule: QuietSchedule
    """The weekly schedule, in each user's own time zone (`{}`: no default)."""
    time_zone: TimeZone | None = None
    """The zone for users who gave none (an IANA name; null: UTC)."""


class QuietDefaultsOut(Documented):
    """A tenant's default quiet hours (`schedule` `{}`: none set)."""

    model_config = examples(
        {"tenant": "default", "schedule": SCHEDULE_EXAMPLE, "time_zone": "Europe/Berlin"}
    )

    tenant: str
    """The tenant."""
    schedule: dict[str, list[str]]
    """The weekly schedule."""
    time_zone: str | None
    """The zone for users who gave none (null: UTC)."""


class QuietOut(Documented):
    """A user's quiet hours as they apply now."""

    model_config = examples(
        {
            "schedule": SCHEDULE_EXAMPLE,
            "source": "tenant",
            "time_zone": "Europe/Berlin",
            "quiet_now": True,
            "until": "2026-11-28T06:00:00Z",
        }
    )

    schedule: dict[str, list[str]] | None
    """The schedule that applies (null: none)."""
    source: Literal["user", "tenant"] | None
    """Whose schedule it is: the user's own, or the tenant's default."""
    time_zone: str
    """The zone it is read in: the user's, else the default's, else UTC."""
    quiet_now: bool
    """Whether the user is in quiet hours now (their e-mails and pushes wait)."""
    until: Instant | None
    """When the current quiet period ends (null: not quiet now)."""
