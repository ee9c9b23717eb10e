"""Reliable deliveries (Design 2, docs/origins.md): statuses, retry schedules and alert triggers."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from enum import StrEnum

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_INTERVALS = 20
_JITTER = random.Random()
"""Retry jitter's own generator: the process-wide `random` state is left alone."""
MAX_INTERVAL_S = 7 * 86400.0


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"
    FINAL_FAILED = "final_failed"
    AWAITING_CONFIRM = "awaiting_confirm"


class AlertTrigger(StrEnum):
    FINAL_FAILURE = "final_failure"
    EVERY_FAILURE = "every_failure"
    NEVER = "never"
    AFTER_N = "after_n"


def parse_duration_s(text: str) -> float:
    """`5s`, `5m`, `1h`, `1d`, `250ms` or a bare number of seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30s, 5m, 1h, 1d)")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2) or "s"]
    if not 0 < seconds <= MAX_INTERVAL_S:
        raise ValueError(f"duration {text!r} must be > 0 and at most 7d")
    return seconds


def parse_intervals(text: str) -> list[float]:
    """One duration or a comma-separated list (`5s,5m,1h,1d`): the last one repeats."""
    parts = [part for part in text.split(",") if part.strip()]
    if not parts or len(parts) > MAX_INTERVALS:
        raise ValueError(f"give 1 to {MAX_INTERVALS} comma-separated durations")
    return [parse_duration_s(part) for part in parts]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    intervals_s: list[float]
    max_retries: int
    """-1 retries forever."""
    jitter: float = 0.1
    """Each delay is scaled by a random factor in [1 - jitter, 1 + jitter]."""

    def exhausted(self, failures: int) -> bool:
        """After `failures` failed attempts, is there no retry left?"""
        return self.max_retries != -1 and failures > self.max_retries

    def delay_s(self, failures: int, retry_after_s: float | None = None) -> float:
        """Pause before the next attempt, after `failures` (>= 1) failed ones."""
        base = self.intervals_s[min(failures, len(self.intervals_s)) - 1]
        delay = base * _JITTER.uniform(1 - self.jitter, 1 + self.jitter)
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, MAX_INTERVAL_S))
        return delay


@dataclass(frozen=True, slots=True)
class AlertPolicy:
    trigger: AlertTrigger
    after_n: int | None = None

    def fires(self, failures: int, final: bool) -> bool:
        """Does the failure numbered `failures` (final or not) raise an alert?"""
        if self.trigger is AlertTrigger.EVERY_FAILURE:
            return True
        if self.trigger is AlertTrigger.FINAL_FAILURE:
            return final
        if self.trigger is AlertTrigger.AFTER_N:
            return failures == (self.after_n or 1)
        return False


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt produced (an HTTP status, or an SMTP reply code)."""

    status_code: int | None
    error: str | None
    duration_s: float
    retry_after_s: float | None = None
    attempted: bool = True
    """False when nothing was sent (an unconfirmed delivery out of retries): no failure
    of its own, and no attempt listed."""
    final: bool = False
    """No retry can help (an SMTP 5xx, a template that fails on this payload)."""
    accepted: bool = False
    """A non-HTTP target took it (an SMTP 250): ok whatever `status_code` says."""
    per_recipient: bool = False
    """The answer is about this delivery's one recipient (a push subscription a push
    service says is gone), not about the definition's target: a 410 ends the delivery
    and leaves the definition enabled."""

    @property
    def ok(self) -> bool:
        if self.error is not None:
            return False
        if self.accepted:
            return True
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def gone(self) -> bool:
        """410: the receiver asks us to stop: the definition is disabled (unless the 410
        is about one recipient only, `per_recipient`)."""
        return self.status_code == 410 and not self.per_recipient
