"""Quiet hours' pure function (services/quiet.py): parsing a weekly schedule strictly,
and whether an instant is quiet and until when, across both daylight-saving transitions
in Europe/Berlin (2026) and America/Sao_Paulo (2018, its last year with DST), with the
instant passed in (a controlled clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notifyhub.services.quiet import InvalidSchedule, QuietState, instant, parse, state

BERLIN = ZoneInfo("Europe/Berlin")
SAO_PAULO = ZoneInfo("America/Sao_Paulo")
NIGHTS = parse({"mon-fri": ["22:00", "07:00"], "sat-sun": ["23:00", "09:00"]})


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def local(zone: ZoneInfo, year: int, month: int, day: int, hour: int, minute: int) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=zone)


def test_ranges_and_single_days_expand_to_weekdays() -> None:
    weekly = parse(
        {"mon-wed": ["22:00", "07:00"], "sat": ["00:00", "24:00"], "fri-fri": ["01:00", "02:00"]}
    )
    assert sorted(weekly) == [0, 1, 2, 4, 5]
    assert parse({"sat-mon": ["20:00", "21:00"]}).keys() == {5, 6, 0}


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"monday": ["22:00", "07:00"]}, "'monday' is not a day"),
        ({"mon-": ["22:00", "07:00"]}, "is not a day"),
        ({"mon-fri": ["22:00"]}, "must be [start, end]"),
        ({"mon": "22:00-07:00"}, "must be [start, end]"),
        ({"mon": ["22:00", "7:00"]}, "'7:00', not a time as HH:MM"),
        ({"mon": ["24:00", "07:00"]}, "'24:00', not a time"),
        ({"mon": ["22:60", "07:00"]}, "not a time"),
        ({"mon": ["22:00\n", "07:00"]}, "not a time"),
        ({"mon": ["22:00", "22:00"]}, "an empty window"),
        ({"mon-fri": ["22:00", "07:00"], "fri": ["01:00", "02:00"]}, "'fri' is named twice"),
    ],
)
def test_a_bad_schedule_names_its_mistake(schedule: dict[str, list[str]], message: str) -> None:
    with pytest.raises(InvalidSchedule, match=None) as raised:
        parse(schedule)
    assert message in str(raised.value)


def test_a_window_crossing_midnight_belongs_to_the_day_it_starts() -> None:
    # Friday 23:30 Berlin (winter, +01:00): in Friday's window, until Saturday 07:00.
    friday_night = local(BERLIN, 2026, 1, 16, 23, 30)
    assert state(NIGHTS, BERLIN, friday_night) == QuietState(True, utc(2026, 1, 17, 6, 0))
    # Saturday 08:00: Friday's window ended at 07:00, Saturday's starts at 23:00.
    assert not state(NIGHTS, BERLIN, local(BERLIN, 2026, 1, 17, 8, 0)).quiet
    # Sunday 08:00: Saturday's window (23:00 -> 09:00) holds it.
    assert state(NIGHTS, BERLIN, local(BERLIN, 2026, 1, 18, 8, 0)).until == utc(2026, 1, 18, 8)
    # Monday 06:59 is Sunday night's (until 09:00); Monday 07:00 would be Friday-like: not.
    assert state(NIGHTS, BERLIN, local(BERLIN, 2026, 1, 19, 6, 59)).until == utc(2026, 1, 19, 8)


def test_the_start_is_in_and_the_end_is_out() -> None:
    start = local(BERLIN, 2026, 1, 14, 22, 0)
    assert state(NIGHTS, BERLIN, start).quiet
    assert not state(NIGHTS, BERLIN, start - timedelta(microseconds=1)).quiet
    assert not state(NIGHTS, BERLIN, local(BERLIN, 2026, 1, 15, 7, 0)).quiet


def test_touching_windows_chain_into_one_quiet_period() -> None:
    weekend = parse(
        {"sat": ["00:00", "24:00"], "sun": ["00:00", "24:00"], "fri": ["20:00", "24:00"]}
    )
    found = state(weekend, BERLIN, local(BERLIN, 2026, 1, 16, 21, 0))
    assert found.until == local(BERLIN, 2026, 1, 19, 0, 0).astimezone(UTC)


def test_the_zone_decides_the_wall_time() -> None:
    instant_ = utc(2026, 1, 14, 22, 30)  # 23:30 in Berlin, 19:30 in Sao Paulo
    assert state(NIGHTS, BERLIN, instant_).quiet
    assert not state(NIGHTS, SAO_PAULO, instant_).quiet


# -- Berlin 2026: clocks jump 02:00 -> 03:00 on Sunday 29 March, fall back 03:00 -> 02:00
# on Sunday 25 October (02:00-02:59 happens twice).


def test_berlin_spring_gap_start_moves_to_the_jump() -> None:
    weekly = parse({"sun": ["02:30", "06:00"]})
    assert instant(datetime(2026, 3, 29, 2, 30), BERLIN, "start") == utc(2026, 3, 29, 1, 0)
    assert not state(weekly, BERLIN, utc(2026, 3, 29, 0, 59, 59)).quiet  # 01:59:59 CET
    assert state(weekly, BERLIN, utc(2026, 3, 29, 1, 0)) == QuietState(True, utc(2026, 3, 29, 4))


def test_berlin_spring_gap_end_moves_to_the_jump() -> None:
    weekly = parse({"sat": ["23:00", "02:30"]})
    assert state(weekly, BERLIN, utc(2026, 3, 29, 0, 30)) == QuietState(True, utc(2026, 3, 29, 1))
    assert not state(weekly, BERLIN, utc(2026, 3, 29, 1, 0)).quiet  # 03:00 CEST


def test_berlin_spring_night_is_an_hour_shorter_in_elapsed_time() -> None:
    # 22:00 CET to 07:00 CEST is 8 hours, not 9: the wall clock decides, as a person expects.
    found = state(NIGHTS, BERLIN, local(BERLIN, 2026, 3, 27, 22, 0))  # Friday night
    assert found.until == local(BERLIN, 2026, 3, 28, 7, 0).astimezone(UTC)
    saturday = state(NIGHTS, BERLIN, local(BERLIN, 2026, 3, 28, 23, 0))
    assert saturday.until == utc(2026, 3, 29, 7, 0)  # 09:00 CEST
    assert saturday.until - local(BERLIN, 2026, 3, 28, 23, 0) == timedelta(hours=9)


def test_berlin_autumn_overlap_start_is_the_first_occurrence() -> None:
    weekly = parse({"sun": ["02:30", "06:00"]})
    first, second = utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)  # both 02:30 local
    assert instant(datetime(2026, 10, 25, 2, 30), BERLIN, "start") == first
    assert not state(weekly, BERLIN, first - timedelta(seconds=1)).quiet
    assert state(weekly, BERLIN, first) == QuietState(True, utc(2026, 10, 25, 5, 0))
    assert state(weekly, BERLIN, second).quiet


def test_berlin_autumn_overlap_end_is_the_second_occurrence() -> None:
    weekly = parse({"sat": ["23:00", "02:30"]})
    # The first 02:30 (00:30 UTC) is still quiet: the night ends at the second (01:30 UTC).
    assert state(weekly, BERLIN, utc(2026, 10, 25, 0, 45)) == QuietState(
        True, utc(2026, 10, 25, 1, 30)
    )
    assert not state(weekly, BERLIN, utc(2026, 10, 25, 1, 30)).quiet


# -- Sao Paulo 2018: DST ended Sunday 18 February (00:00 -> 23:00 on the 17th: 23:00-23:59
# twice) and started Sunday 4 November (00:00 -> 01:00: midnight does not exist).


def test_sao_paulo_spring_gap_at_midnight() -> None:
    weekly = parse({"sat": ["22:00", "24:00"], "sun": ["00:00", "08:00"]})
    # Saturday 3 Nov 22:00 (-03) = 01:00 UTC; midnight is 01:00 (-02) = 03:00 UTC.
    found = state(weekly, SAO_PAULO, utc(2018, 11, 4, 1, 0))
    assert found == QuietState(True, local(SAO_PAULO, 2018, 11, 4, 8, 0).astimezone(UTC))
    assert found.until == utc(2018, 11, 4, 10, 0)
    # Sunday alone: its 00:00 start moves to the jump, 03:00 UTC.
    sunday = parse({"sun": ["00:00", "08:00"]})
    assert not state(sunday, SAO_PAULO, utc(2018, 11, 4, 2, 59)).quiet
    assert state(sunday, SAO_PAULO, utc(2018, 11, 4, 3, 0)).quiet


def test_sao_paulo_autumn_overlap_keeps_the_whole_night() -> None:
    weekly = parse({"sat": ["23:30", "07:00"]})
    # 23:30 on Saturday 17 Feb happens at 01:30 UTC (-02) and 02:30 UTC (-03): starts at the first.
    assert instant(datetime(2018, 2, 17, 23, 30), SAO_PAULO, "start") == utc(2018, 2, 18, 1, 30)
    found = state(weekly, SAO_PAULO, utc(2018, 2, 18, 1, 30))
    assert found == QuietState(True, utc(2018, 2, 18, 10, 0))  # 07:00 -03
    assert not state(weekly, SAO_PAULO, utc(2018, 2, 18, 1, 29)).quiet


def test_sao_paulo_overlap_end_is_the_second_occurrence() -> None:
    weekly = parse({"sat": ["20:00", "23:30"]})
    assert state(weekly, SAO_PAULO, utc(2018, 2, 18, 2, 0)) == QuietState(
        True, utc(2018, 2, 18, 2, 30)
    )


ZONES = st.sampled_from([BERLIN, SAO_PAULO, ZoneInfo("UTC"), ZoneInfo("America/New_York")])
CLOCK = st.builds(lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 23), st.integers(0, 59))
WINDOWS = st.tuples(CLOCK, CLOCK).filter(lambda w: w[0] != w[1])
SCHEDULES = st.dictionaries(
    st.sampled_from(["mon", "tue", "wed", "thu", "fri", "sat", "sun"]), WINDOWS
)
INSTANTS = st.datetimes(datetime(2017, 1, 1), datetime(2028, 12, 31), timezones=st.just(UTC))


@given(SCHEDULES, ZONES, INSTANTS)
def test_until_is_later_and_not_quiet(
    schedule: dict[str, tuple[str, str]], zone: ZoneInfo, now: datetime
) -> None:
    weekly = parse({k: list(v) for k, v in schedule.items()})
    found = state(weekly, zone, now)
    if found.quiet:
        assert found.until is not None and found.until > now
        assert found.until - now <= timedelta(days=8)
        assert not state(weekly, zone, found.until).quiet
        assert state(weekly, zone, found.until - timedelta(seconds=1)).quiet
    else:
        assert found.until is None


@given(SCHEDULES, ZONES, INSTANTS)
def test_quiet_within_a_window_means_quiet_until_the_same_end(
    schedule: dict[str, tuple[str, str]], zone: ZoneInfo, now: datetime
) -> None:
    weekly = parse({k: list(v) for k, v in schedule.items()})
    found = state(weekly, zone, now)
    if found.quiet and found.until is not None:
        later = now + (found.until - now) / 2
        assert state(weekly, zone, later).until == found.until
