"""The notification, a user's copy of it, counts and inbox change events."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PlainSerializer, field_validator

NotificationStatus = Literal["unread", "read"]
PRINTABLE = r"^[^\x00-\x1F\x7F-\x9F]*$"
"""No control characters (Unicode Cc)."""


def to_rfc3339(value: datetime) -> str:
    """UTC with millisecond precision and a `Z`, as every response carries times."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


Timestamp = Annotated[datetime, PlainSerializer(to_rfc3339, return_type=str)]


class Severity(StrEnum):
    INFO = "info"
    SUCCESS = "success"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


class Display(StrEnum):
    INBOX = "inbox"
    TOAST = "toast"
    BOTH = "both"


class Ref(BaseModel):
    """A typed reference to something outside notifyhub: an actor or a target."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str = Field(min_length=1, max_length=64, pattern=PRINTABLE)
    id: str = Field(min_length=1, max_length=200, pattern=PRINTABLE)

    @field_validator("type", "id")
    @classmethod
    def _no_surrogates(cls, value: str) -> str:
        # Stored in PostgreSQL, which refuses NUL (the pattern) and lone surrogates.
        if any("\ud800" <= ch <= "\udfff" for ch in value):
            raise ValueError("must not contain lone surrogates")
        return value


class Notification(BaseModel):
    """One message as sent; every recipient's copy shares this content."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    tenant: str
    title: str
    body: str = ""
    severity: Severity = Severity.INFO
    category: str | None = None
    source: str | None = None
    display: Display = Display.BOTH
    data: dict[str, JsonValue] = Field(default_factory=dict)
    action_url: str | None = None
    actor: Ref | None = None
    target: Ref | None = None
    created_at: Timestamp
    expires_at: Timestamp
    collapse_key: str | None = None


class InboxItem(Notification):
    """A user's copy: the shared content plus that user's state."""

    status: NotificationStatus = "unread"
    seen: bool = False
    read_at: Timestamp | None = None


class Counts(BaseModel):
    model_config = ConfigDict(frozen=True)

    unread: int
    unseen: int
    total: int


class InboxPage(BaseModel):
    items: list[InboxItem]
    next_cursor: str | None
    unread: int


class Recipients(BaseModel):
    """Who should get a notification; a user named by several routes gets one copy."""

    model_config = ConfigDict(frozen=True)

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()


class Draft(BaseModel):
    """A notification as a service submits it: content without id, times or state."""

    model_config = ConfigDict(frozen=True)

    tenant: str = "default"
    title: str
    body: str = ""
    severity: Severity = Severity.INFO
    category: str | None = None
    source: str | None = None
    display: Display = Display.BOTH
    data: dict[str, JsonValue] = Field(default_factory=dict)
    action_url: str | None = None
    actor: Ref | None = None
    target: Ref | None = None
    collapse_key: str | None = None
    ttl_s: int | None = None
    expires_at: datetime | None = None
    deliver_at: datetime | None = None
