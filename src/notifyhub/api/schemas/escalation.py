"""Bodies of escalation: a publish's or rule's `escalate` steps, a tenant's defaults per
category, and a user's pending steps as operators see them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictInt

from notifyhub.api.schemas.common import TOKEN, Category, Documented, Strict, examples
from notifyhub.domain.escalation import MAX_AFTER_S, MAX_STEPS, Step, StepChannel, Unless
from notifyhub.domain.notification import Timestamp


class EscalationStepIn(Strict):
    """One step: after `after_s` seconds, send the notification on `channel` unless the
    user's copy is `unless` by then (`read` implies `seen`); a copy deleted, recalled or
    expired sends nothing. Each step runs once."""

    model_config = examples({"after_s": 300, "unless": "seen", "channel": "push"})

    after_s: Annotated[StrictInt, Field(ge=1, le=MAX_AFTER_S)]
    """Seconds after the notification (at least 1, at most 30 days)."""
    unless: Unless
    """`seen`, `read` or `archived`: the state that cancels the step."""
    channel: StepChannel
    """`email` or `push` (each user's preferences still decide, `critical` bypasses them)."""

    def step(self) -> Step:
        return Step(after_s=self.after_s, unless=self.unless, channel=self.channel)


Escalate = Annotated[list[EscalationStepIn], Field(max_length=MAX_STEPS)]
"""Up to 5 escalation steps."""


def steps_of(escalate: list[EscalationStepIn]) -> tuple[Step, ...]:
    """The steps as the domain takes them."""
    return tuple(s.step() for s in escalate)


class EscalationDefaultsIn(Strict):
    """A tenant's escalation steps per category, for notifications of that category that
    name no `escalate` of their own (`PUT` replaces them all)."""

    model_config = examples(
        {"categories": {"incident": [{"after_s": 300, "unless": "read", "channel": "email"}]}}
    )

    categories: dict[Category, Escalate] = Field(
        default_factory=dict,
        max_length=200,
        json_schema_extra={"propertyNames": {"minLength": 1, "maxLength": 64, "pattern": TOKEN}},
    )
    """By category name: its steps (an empty list: none); `PUT` replaces them all."""


class EscalationDefaultsOut(Documented):
    """A tenant's escalation defaults per category."""

    model_config = examples(
        {
            "tenant": "default",
            "categories": {"incident": [{"after_s": 300, "unless": "read", "channel": "email"}]},
        }
    )

    tenant: str
    categories: dict[str, list[EscalationStepIn]]
    """By category name: its steps."""


_PENDING_EXAMPLE = {
    "id": "01JD0V8W5Q4F2N7K3M9P6R1T8X",
    "notification_id": "01JD0V8W5Q4F2N7K3M9P6R1T8Y",
    "step": 1,
    "channel": "push",
    "unless": "seen",
    "due_at": "2026-11-20T09:20:02.113Z",
}


class PendingEscalation(Documented):
    """A step not run yet."""

    model_config = examples(_PENDING_EXAMPLE)

    id: str
    """The step's id (`DELETE .../escalations/{id}` cancels it)."""
    notification_id: str
    step: int
    """Its place in the notification's steps, from 1."""
    channel: str
    """`email` or `push`."""
    unless: str
    """`seen`, `read` or `archived`."""
    due_at: Timestamp
    """When it runs."""


class PendingEscalations(Documented):
    """A user's pending escalation steps, the earliest first."""

    model_config = examples({"items": [_PENDING_EXAMPLE]})

    items: list[PendingEscalation]
