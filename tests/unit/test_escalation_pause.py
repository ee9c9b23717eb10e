"""The escalation worker sleeps until the earliest pending step is due, not a fixed
poll: a step is decided as soon as it is due, not up to a quarter second later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from notifyhub.workers.escalation import INTERVAL_S, MIN_PAUSE_S, WAKE_MARGIN_S, pause_until

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_it_wakes_just_after_the_earliest_step_is_due() -> None:
    assert pause_until(NOW + timedelta(milliseconds=120), NOW) == 0.12 + WAKE_MARGIN_S


def test_it_still_looks_every_interval_for_steps_published_meanwhile() -> None:
    assert pause_until(None, NOW) == INTERVAL_S
    assert pause_until(NOW + timedelta(hours=1), NOW) == INTERVAL_S


def test_a_step_due_but_held_elsewhere_is_asked_again_soon_without_spinning() -> None:
    assert pause_until(NOW - timedelta(seconds=3), NOW) == MIN_PAUSE_S
    assert pause_until(NOW, NOW) == MIN_PAUSE_S
