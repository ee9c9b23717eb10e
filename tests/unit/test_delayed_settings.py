"""The delayed queue's settings refuse a retention that could orphan transitions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from notifyhub.settings import RETENTION_MIN_S, DelayedSettings, Settings


@pytest.mark.parametrize("seconds", [0.5, 30, RETENTION_MIN_S - 1])
def test_a_retention_shorter_than_a_minute_is_refused(seconds: float) -> None:
    with pytest.raises(ValidationError, match=r"retention_s must be 0 \(keep forever\) or at"):
        DelayedSettings(retention_s=seconds)


@pytest.mark.parametrize("seconds", [0, RETENTION_MIN_S, 7 * 86400])
def test_keeping_forever_a_minute_or_longer_is_accepted(seconds: float) -> None:
    assert DelayedSettings(retention_s=seconds).retention_s == seconds


def test_a_short_retention_from_the_environment_names_the_setting_and_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOTIFYHUB_DELAYED__RETENTION_S", "5")
    with pytest.raises(ValidationError, match=r"delayed\.retention_s must be 0") as refused:
        Settings()
    assert "before its last transitions reach PostgreSQL" in str(refused.value)
