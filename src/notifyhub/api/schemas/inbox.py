"""Bodies of a user's inbox changes: one notification's state, read-all and bulk actions."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictInt, model_validator

from notifyhub.api.schemas.common import (
    TIME_EXAMPLE,
    ULID_EXAMPLE,
    Category,
    Documented,
    NotificationId,
    Strict,
    Time,
    examples,
)
from notifyhub.api.schemas.views import ViewName
from notifyhub.domain.notification import to_ms


class PatchRequest(Strict):
    """Change one notification's state: read, unread or seen, archived, pinned, snoozed
    (any combination, at least one field; all of it happens, or none of it)."""

    model_config = examples(
        {"read": True},
        {"seen": True},
        {"archived": True},
        {"pinned": True, "read": False},
        {"snooze": 3600},
        {"snoozed_until": TIME_EXAMPLE},
        {"snoozed_until": None},
    )

    read: StrictBool | None = None
    """`true` marks it read (and seen), `false` unread again."""
    seen: Literal[True] | None = None
    """`true` marks it seen (counted out of `unseen`); it cannot be unseen."""
    archived: StrictBool | None = None
    """`true` archives it (out of the default list and the counts, listed by
    `status=archived`, its read state kept), `false` brings it back."""
    pinned: StrictBool | None = None
    """`true` pins it (first in the default list; at most 20 pinned, a 409 with the
    `limit` beyond), `false` unpins it."""

    snoozed_until: Time | None = None
    """Snooze it until this time (RFC 3339 or epoch milliseconds; in the future, at most
    90 days ahead): out of the default list and the counts until then, when it comes
    back unread (a `notification` event with `"resurfaced": true`). `null` unsnoozes."""
    snooze: Annotated[StrictInt, Field(ge=1, le=90 * 24 * 3600)] | None = None
    """Snooze it for this many seconds (instead of `snoozed_until`)."""

    @model_validator(mode="after")
    def _something(self) -> PatchRequest:
        changes = (self.read, self.seen, self.archived, self.pinned, self.snooze)
        unsnooze = "snoozed_until" in self.model_fields_set  # null means unsnooze
        if all(v is None for v in changes) and not unsnooze:
            raise ValueError(
                "give at least one of `read`, `seen`, `archived`, `pinned`, `snoozed_until`, "
                "`snooze`"
            )
        if self.snooze is not None and "snoozed_until" in self.model_fields_set:
            raise ValueError("give `snooze` or `snoozed_until`, not both")
        return self

    def snooze_until_ms(self, now: datetime) -> int | None:
        """When the snooze asked for ends (ms), any time given (the inbox checks it is
        in the future: the epoch is a time too); None when none is asked for."""
        if self.snooze is not None:
            return to_ms(now + timedelta(seconds=self.snooze))
        return None if self.snoozed_until is None else to_ms(self.snoozed_until)

    @property
    def unsnoozes(self) -> bool:
        """`"snoozed_until": null`, the only way to end a snooze now."""
        return "snoozed_until" in self.model_fields_set and self.snoozed_until is None


class ReadAllRequest(Strict):
    """Mark every unread notification read, optionally only a category, older ones or
    those in one view (tab); what is given combines (all must hold)."""

    model_config = examples(
        {}, {"category": "restock", "before": TIME_EXAMPLE}, {"view": "mentions"}
    )

    category: Category | None = None
    """Only notifications of this category."""
    before: Time | None = None
    """Only notifications created before this time (RFC 3339 or epoch milliseconds; a
    notification back from a snooze as of when it came back, as the list sorts it)."""
    view: ViewName | None = None
    """Only the notifications in this view (tab), the ones `GET /v1/me/notifications?view=`
    lists: the tenant's or the user's own (`GET /v1/me/views`). A view the user does not
    have (another tenant's included) is a 422, as for the list."""


class BulkRequest(Strict):
    """One action on up to 100 notifications: `read`/`seen`/`archived`, or `delete`."""

    model_config = examples(
        {"ids": [ULID_EXAMPLE, "01JD3Q5A2B3C4D5E6F7G8H9J0K"], "read": True},
        {"ids": [ULID_EXAMPLE], "archived": True},
        {"ids": [ULID_EXAMPLE], "delete": True},
    )

    ids: list[NotificationId] = Field(min_length=1, max_length=100)
    """The notifications' ids; ids the user does not have are skipped."""
    read: StrictBool | None = None
    """`true` marks them read, `false` unread."""
    seen: Literal[True] | None = None
    """`true` marks them seen."""
    archived: StrictBool | None = None
    """`true` archives them, `false` brings them back."""
    delete: Literal[True] | None = None
    """`true` deletes them from the inbox (not with `read`, `seen` or `archived`)."""

    @model_validator(mode="after")
    def _one_action(self) -> BulkRequest:
        changes = (self.read, self.seen, self.archived)
        if self.delete and any(v is not None for v in changes):
            raise ValueError("`delete` cannot be combined with `read`, `seen` or `archived`")
        if not self.delete and all(v is None for v in changes):
            raise ValueError("give `read`, `seen`, `archived` or `delete`")
        return self


class Updated(Documented):
    """How many notifications changed."""

    model_config = examples({"updated": 3})

    updated: int
    """Notifications whose state changed (or that were deleted)."""
