"""Bodies of delayed queues: push, take and ack a message, its state, the admin's queue list."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
from pydantic import Field, JsonValue, StrictInt, field_validator, model_validator

from notifyhub.api.schemas.common import (
    TIME_EXAMPLE,
    ULID_EXAMPLE,
    Documented,
    Instant,
    Line,
    Name,
    NotificationId,
    Strict,
    Tenant,
    Time,
    Timestamp,
    ensure_storable,
    examples,
)
from notifyhub.services.delayed import Status as DelayedStatus

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MessageId = NotificationId
"""Delayed messages have ULID ids too."""


DeprecatedTopic = Annotated[
    Name | None,
    Field(
        description="Deprecated (one release): the queue's former field name; give `queue`.",
        json_schema_extra={"deprecated": True},
    ),
]


class DelayedIn(Strict):
    """A message to deliver to a queue's consumers later (Design 5)."""

    model_config = examples(
        {
            "tenant": "default",
            "queue": "order-timeouts",
            "body": {"order": "SO-1042", "action": "cancel-if-unpaid"},
            "delay_ms": 900000,
            "priority": 5,
            "ttl_ms": 30000,
            "biz_key": "SO-1042",
        },
        {"queue": "reminders", "body": "call back", "due_at": TIME_EXAMPLE},
    )

    tenant: Tenant = "default"
    """The queue's tenant."""
    queue: Name | None = None
    """The queue's name within the tenant."""
    topic: DeprecatedTopic = None
    body: JsonValue = None
    """Any JSON, up to 64 KiB serialized, handed to the consumer as is."""
    delay_ms: Annotated[StrictInt, Field(ge=0, le=366 * 24 * 3600 * 1000)] | None = None
    """Due after this many milliseconds; exactly one of `delay_ms` and `due_at`."""
    due_at: Time | None = None
    """Due at this time (RFC 3339 or epoch milliseconds), not before 1970."""
    priority: Annotated[StrictInt, Field(ge=0, le=9)] = 0
    """Higher first among messages equally due."""
    ttl_ms: Annotated[StrictInt, Field(ge=100, le=24 * 3600 * 1000)] | None = None
    """How long a consumer may hold it before it is offered again (default: configured)."""
    biz_key: Annotated[Line, Field(max_length=200)] | None = None
    """Your own reference (an order number), returned with the message."""

    @field_validator("due_at")
    @classmethod
    def _not_before_epoch(cls, value: datetime | None) -> datetime | None:
        """As epoch milliseconds below 0 are refused: ready scores hold the due time in
        ms below each priority's band, so a time centuries back jumped the priorities."""
        if value is not None and value < EPOCH:
            raise ValueError("must not be before 1970-01-01T00:00:00Z (epoch milliseconds 0)")
        return value

    @model_validator(mode="after")
    def _one_time(self) -> DelayedIn:
        if (self.queue is None) == (self.topic is None):
            raise ValueError("give `queue` (or its deprecated name `topic`), exactly once")
        if (self.delay_ms is None) == (self.due_at is None):
            raise ValueError("give exactly one of `delay_ms` and `due_at`")
        ensure_storable(self.body)
        try:
            size = len(orjson.dumps(self.body))
        except orjson.JSONEncodeError as exc:
            raise ValueError("body: must be JSON without lone surrogates") from exc
        if size > 64 * 1024:
            raise ValueError(f"body: at most 65536 bytes serialized (got {size})")
        return self

    @property
    def queue_name(self) -> str:
        """`queue`, or the deprecated `topic` when only that was given."""
        name = self.queue or self.topic
        assert name is not None  # the validator asked for one
        return name


class DelayedAccepted(Documented):
    """The message is committed and queued."""

    model_config = examples({"id": ULID_EXAMPLE, "tenant": "default", "due_at": TIME_EXAMPLE})

    id: str
    """The message's ULID."""
    tenant: str
    """Its tenant."""
    due_at: Instant
    """When it becomes ready for consumers."""


class DelayedAck(Strict):
    """The receipt of a message taken from its queue."""

    model_config = examples({"receipt": "r-01JD3Q7Z0Y1X2W3V4T5S6R7Q8P"})

    receipt: Annotated[str, Field(min_length=1, max_length=200)]
    """The `receipt` the message came with."""


_MESSAGE_EXAMPLE: dict[str, Any] = {
    "id": ULID_EXAMPLE,
    "tenant": "default",
    "queue": "order-timeouts",
    "topic": "order-timeouts",
    "body": {"order": "SO-1042", "action": "cancel-if-unpaid"},
    "priority": 5,
    "ttl_ms": 30000,
    "biz_key": "SO-1042",
    "due_at": TIME_EXAMPLE,
}


class DelayedMessageOut(Documented):
    """A delayed message."""

    model_config = examples(_MESSAGE_EXAMPLE)

    id: str
    """The message's ULID."""
    tenant: str
    """Its tenant."""
    queue: str
    """Its queue."""
    topic: Annotated[
        str,
        Field(
            description="Deprecated (one release): the same as `queue`.",
            json_schema_extra={"deprecated": True},
        ),
    ]
    body: JsonValue
    """The body, as pushed."""
    priority: int
    """0..9, higher first."""
    ttl_ms: int
    """How long a consumer may hold it before it is offered again."""
    biz_key: str | None
    """The pusher's own reference."""
    due_at: Timestamp
    """When it is (or was) due."""


class DelayedMessageState(DelayedMessageOut):
    """A delayed message and where it is in its life."""

    model_config = examples({**_MESSAGE_EXAMPLE, "status": "delayed"})

    status: DelayedStatus
    """delayed, ready, reserved, consumed or cancelled."""


class DelayedReserved(DelayedMessageOut):
    """A message taken from its queue: ack it with its receipt within `ttl_ms`."""

    model_config = examples({**_MESSAGE_EXAMPLE, "receipt": "r-01JD3Q7Z0Y1X2W3V4T5S6R7Q8P"})

    receipt: str
    """Present it to ack the message (stale once the message is offered again)."""


class DelayedPage(Documented):
    """Messages taken from the queue (none when the wait ended first)."""

    model_config = examples(
        {"messages": [{**_MESSAGE_EXAMPLE, "receipt": "r-01JD3Q7Z0Y1X2W3V4T5S6R7Q8P"}]}
    )

    messages: list[DelayedReserved]
    """At most `max` messages, most urgent first."""


class Restored(Documented):
    """What a restore re-queued."""

    model_config = examples({"restored": 42})

    restored: int
    """Messages re-queued in Redis."""


_QUEUE = {
    "tenant": "default",
    "name": "order-timeouts",
    "depth": 42,
    "delayed": 40,
    "ready": 2,
    "in_flight": 1,
    "oldest_age_ms": 1250,
}


class QueueOut(Documented):
    """A delayed queue's messages, counted in Redis now."""

    model_config = examples(_QUEUE)

    tenant: str
    """Its tenant."""
    name: str
    """The queue's name (`notifyhub.scheduled` holds scheduled notifications)."""
    depth: int
    """Messages not yet taken: `delayed` + `ready`."""
    delayed: int
    """Waiting for their due time."""
    ready: int
    """Due, waiting for a consumer."""
    in_flight: int
    """Taken by a consumer and not yet acked (offered again after their `ttl_ms`)."""
    oldest_age_ms: int | None
    """How long ago the longest-waiting due message fell due; null when none is due."""


class QueuePage(Documented):
    """A page of the tenant's delayed queues, by name."""

    model_config = examples({"queues": [_QUEUE], "next_cursor": "order-timeouts"})

    queues: list[QueueOut]
    """Queues Redis has held a message of, by name."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""
