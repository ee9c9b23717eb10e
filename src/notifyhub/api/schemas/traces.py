"""Bodies of a notification's routing trace."""

from __future__ import annotations

from typing import Any, Literal

from notifyhub.api.schemas.common import Documented, Instant, examples


class TraceLineOut(Documented):
    """What routing decided for one recipient."""

    model_config = examples(
        {
            "user": "alice",
            "source": "group:replenishers",
            "outcome": "delivered",
            "seq": 42,
            "streamed_to": 1,
            "channels": {"email": "e-mailed", "push": "pushed to 2 browsers"},
        }
    )

    user: str
    source: str
    """Where routing first reached the user: `user` (named directly), `group:<name>`,
    `topic:<name>` (directly or through a group the topic lists), `rule:<name>` or
    `producer:<name>` (which resolved the users itself). A user reached through several
    is named by the first: users named directly, then groups in the order named, then
    topics."""
    outcome: Literal["delivered", "pending", "already_held", "dropped_by_preference"]
    """`delivered` (stored as the user's change `seq`), `pending` (a big fan-out's copy,
    made by the user's next read), `already_held` (a retried publish),
    `dropped_by_preference` (the user's preferences drop its category)."""
    seq: int | None = None
    """The user's change seq of a delivered copy."""
    replaced: str | None = None
    """Collapsed: the id of the user's earlier copy with the same `collapse_key`, which
    this one replaced."""
    evicted: list[str] = []
    """Capped: the ids of the oldest notifications the user's full inbox
    (`limits.items_per_user`) dropped to make room for this one."""
    streamed_to: int = 0
    """Live event streams of the user, in every hub process, that were sent this copy's
    `notification` event (0: none had it); each process adds its count within a second.
    A copy that joined the user's open thread is streamed as the thread's `update` and is
    not counted."""
    channels: dict[str, str] = {}
    """Beyond the inbox (a notification sent with `channels`), what came of each channel
    once the channel worker expanded it: `e-mailed`, `pushed to N browsers` (an outbox
    delivery each, `GET /v1/deliveries`), or `skipped: preference`, `skipped: no
    address`, `skipped: no subscription`, `skipped: no e-mail definition`, `skipped: no
    push definition`; empty until then."""


class TraceNow(Documented):
    """`?user=`: that user's copy as it stands now."""

    in_inbox: bool
    """The copy is in the user's inbox now (false: never stored, deleted, recalled,
    expired, evicted or replaced)."""
    status: Literal["unread", "read"] | None
    archived: bool | None
    snoozed_until: Instant | None
    expired: bool
    """The notification's expiry has passed."""
    streams_open: int
    """The user's event streams open now, in every hub process."""


class TracePlacing(Documented):
    """A deferred fan-out whose copies are still being written (after its 202, batch by
    batch: a user whose batch is not written yet does not list it)."""

    users: int
    """Recipients in all."""
    placed: int
    """Recipients whose batch is written."""


class TraceOut(Documented):
    """A notification's routing trace: who was named, how many recipients each outcome
    had, and a line per recipient (the first `routing_trace_users`; `?user=` for one)."""

    model_config = examples(
        {
            "id": "01JD3Q4M6T9W2Z8K5N7R1C0B3X",
            "tenant": "default",
            "created_at": "2026-11-20T09:15:02.113Z",
            "expires_at": "2026-12-20T09:15:02.113Z",
            "category": "restock",
            "origin": "publish",
            "named": {"users": 1, "groups": ["replenishers"], "topics": []},
            "resolved": 13,
            "outcomes": {
                "delivered": 12,
                "pending": 0,
                "already_held": 0,
                "dropped_by_preference": 1,
            },
            "recorded": 13,
            "recalled_at": None,
            "placing": None,
            "lines": [
                {
                    "user": "bob",
                    "source": "group:replenishers",
                    "outcome": "dropped_by_preference",
                    "streamed_to": 0,
                }
            ],
            "now": None,
        }
    )

    id: str
    tenant: str
    created_at: Instant
    expires_at: Instant
    category: str | None
    origin: str
    """`publish`, or the rule or producer that resolved the users (`rule:<name>`,
    `producer:<name>`)."""
    named: dict[str, Any]
    """Who the publish named: `users` (how many), `groups`, `topics`."""
    resolved: int
    """Recipients after resolving groups and topics (each user once)."""
    outcomes: dict[str, int]
    """Recipients per outcome."""
    recorded: int
    """Recipients with a line of their own (the first `routing_trace_users`)."""
    recalled_at: Instant | None
    placing: TracePlacing | None = None
    """A deferred fan-out whose copies are still being written; null once every batch is
    (its lines say `pending` either way)."""
    lines: list[TraceLineOut]
    """By user id: the first 100, or `?user=`'s alone."""
    now: TraceNow | None = None
    """With `?user=`: that user's copy now."""
