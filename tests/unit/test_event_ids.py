"""Event ids: `<seq>-<epoch>` out, and one parser for what clients send back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notifyhub.errors import InvalidInput
from notifyhub.realtime.events import MAX_AHEAD, MAX_EVENT_ID, EventId, event_id, parse_event_id

UNICODE_DIGITS = "\u00b2\u00b3\u00b9\u2460\u0663\u07c1\u0661\U0001d7d9"
"""Superscripts, a circled digit, Arabic-Indic, NKo, a mathematical digit: `str.isdigit()`
says yes to each, and `int()` to some."""
EPOCHS = st.text(alphabet="0123456789abcdef", min_size=1, max_size=16)


@given(seq=st.integers(0, 10**18 - 1), epoch=st.one_of(st.just(""), EPOCHS))
def test_every_id_the_hub_issues_parses_back(seq: int, epoch: str) -> None:
    assert parse_event_id(event_id(seq, epoch).decode()) == EventId(seq, epoch)


@given(value=st.one_of(st.text(), st.text(alphabet=UNICODE_DIGITS + "0123456789-abcdef \t+")))
def test_any_text_is_a_cursor_or_a_422_never_anything_else(value: str) -> None:
    try:
        parsed = parse_event_id(value)
    except InvalidInput:
        return
    assert parsed is None or str(parsed.seq).isascii()


@pytest.mark.parametrize(
    "value", ["²", "①", "1¹", "٣", "1-", "-1", "1-ABC", "1-x", " 1", "1\n", "+1", "1" * 19]
)
def test_what_the_hub_never_issues_is_refused(value: str) -> None:
    with pytest.raises(InvalidInput, match="Last-Event-ID"):
        parse_event_id(value)


def test_empty_means_none_and_length_is_bounded() -> None:
    assert parse_event_id(None) is None and parse_event_id("") is None
    assert parse_event_id("0") == EventId(0, "")
    with pytest.raises(InvalidInput, match=f"at most {MAX_EVENT_ID}"):
        parse_event_id("1" * (MAX_EVENT_ID + 1), "last_event_id")


NID = "01JD3Q4M6T9W2Z8K5N7R1C0B3X"


@given(
    seq=st.integers(0, 10**18 - 1),
    epoch=st.one_of(st.just(""), EPOCHS),
    ahead=st.lists(st.just(NID), max_size=MAX_AHEAD),
)
def test_ids_with_notifications_shown_ahead_parse_back(
    seq: int, epoch: str, ahead: list[str]
) -> None:
    parsed = parse_event_id(event_id(seq, epoch, ahead).decode())
    assert parsed == EventId(seq, epoch, tuple(ahead))


def test_what_an_announced_event_id_may_not_be() -> None:
    assert parse_event_id(f"0.{NID}") == EventId(0, "", (NID,))
    with pytest.raises(InvalidInput, match="at most 4"):
        parse_event_id("1-ab" + f".{NID}" * (MAX_AHEAD + 1))
    for bad in [f"1-ab.{NID.lower()}", f"1-ab.{NID[:-1]}", f"1-ab.{NID}.", f"1-ab{NID}"]:
        with pytest.raises(InvalidInput, match="Last-Event-ID"):
            parse_event_id(bad)
    with pytest.raises(InvalidInput, match="not a notification id"):  # past the largest ULID
        parse_event_id("1-ab.8" + "0" * 25)
