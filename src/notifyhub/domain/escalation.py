"""Escalation steps: send a notification again on another channel later, unless the
user's copy was seen, read or archived by then (services/escalation.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

MAX_STEPS = 5
"""A notification escalates in at most this many steps."""
MAX_AFTER_S = 30 * 86_400
"""A step falls due at most 30 days after its notification."""

Unless = Literal["seen", "read", "archived"]
StepChannel = Literal["email", "push"]


class Step(BaseModel):
    """After `after_s` seconds, send on `channel` unless the copy is `unless` by then
    (read implies seen; a deleted, recalled or expired copy sends nothing)."""

    model_config = ConfigDict(frozen=True)

    after_s: int
    unless: Unless
    channel: StepChannel
