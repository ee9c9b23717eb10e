"""Request and response bodies of the HTTP API, validated at the edge (extra fields refused)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    WithJsonSchema,
    model_validator,
)

from notifyhub.domain.notification import Display, Ref, Severity
from notifyhub.services.delayed import Status as DelayedStatus

MAX_DATA_BYTES = 16 * 1024
MAX_EPOCH_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
MAX_EPOCH_DIGITS = 14
MAX_JSON_NUMBER = 2**63
MAX_TTL_FIELD_S = 100 * 366 * 24 * 3600
TOKEN = r"^[A-Za-z0-9._:-]+$"
NO_CONTROL = r"^[^\x00-\x1F\x7F-\x9F]*$"
"""No control characters (Unicode Cc), so the schema says what `_single_line` enforces."""
NO_CONTROL_BUT_WHITESPACE = r"^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F]*$"


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Unicode categories Cc (control characters) and Cs (lone surrogates)."""
_CONTROL_BUT_WHITESPACE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
"""The same, allowing CR, LF and TAB."""


def _clean(value: str, forbidden: re.Pattern[str]) -> str:
    if forbidden.search(value) is not None:
        raise ValueError("must not contain control characters, NUL bytes or lone surrogates")
    return value


def _single_line(value: str) -> str:
    return _clean(value, _CONTROL)


def _multi_line(value: str) -> str:
    return _clean(value, _CONTROL_BUT_WHITESPACE)


def _to_time(value: Any) -> Any:
    """Times are RFC 3339 strings or epoch milliseconds; naive times are UTC."""
    if isinstance(value, str):
        try:  # a number in a string (query parameters are strings) is epoch ms too
            value = int(value) if value.isdigit() else float(value)
        except ValueError:
            return value  # RFC 3339, parsed by pydantic
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not 0 <= value <= MAX_EPOCH_MS:  # also keeps fromtimestamp from overflowing
            raise ValueError(f"epoch milliseconds must be within 0..{MAX_EPOCH_MS}")
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    return value


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _jsonb_safe(value: JsonValue) -> bool:
    """Whether PostgreSQL's jsonb keeps `value` as is (nesting is bounded by the limits)."""
    if isinstance(value, dict):
        return all("\x00" not in k and _jsonb_safe(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_jsonb_safe(v) for v in value)
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return -MAX_JSON_NUMBER <= value < MAX_JSON_NUMBER
    return True


def _storable(value: JsonValue) -> None:
    # Scheduled and delayed bodies live in jsonb, which refuses \u0000 and writes 1e30
    # back as 1000...0, an integer orjson cannot encode: neither could be sent later.
    if not _jsonb_safe(value):
        raise ValueError(f"must not contain NUL characters, nor numbers beyond +-{MAX_JSON_NUMBER}")


def _small_json(value: dict[str, JsonValue]) -> dict[str, JsonValue]:
    _storable(value)
    try:
        size = len(orjson.dumps(value))
    except orjson.JSONEncodeError as exc:
        raise ValueError("must be JSON without lone surrogates") from exc
    if size > MAX_DATA_BYTES:
        raise ValueError(f"must serialize to at most {MAX_DATA_BYTES} bytes (got {size})")
    return value


Line = Annotated[str, Field(pattern=NO_CONTROL), AfterValidator(_single_line)]
Tenant = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
UserId = Annotated[Line, Field(min_length=1, max_length=200)]
Name = Annotated[str, Field(min_length=1, max_length=100, pattern=TOKEN)]
Category = Annotated[str, Field(min_length=1, max_length=64, pattern=TOKEN)]
CollapseKey = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/@-]+$")]
NotificationId = Annotated[
    str, Field(min_length=26, max_length=26, pattern=r"^[0-9A-HJKMNP-TV-Z]+$")
]
MessageId = NotificationId
"""Delayed messages have ULID ids too."""
TIME_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "string", "pattern": f"^[0-9]{{1,{MAX_EPOCH_DIGITS}}}$"},
        {"type": "number", "minimum": 0, "maximum": MAX_EPOCH_MS},
    ]
}
"""RFC 3339, or epoch milliseconds as a number or a string of digits."""
Time = Annotated[
    datetime, BeforeValidator(_to_time), AfterValidator(_aware), WithJsonSchema(TIME_SCHEMA)
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecipientsIn(Strict):
    users: list[UserId] = Field(default_factory=list, max_length=10_000)
    groups: list[Name] = Field(default_factory=list, max_length=100)
    topics: list[Name] = Field(default_factory=list, max_length=100)


class PublishRequest(Strict):
    tenant: Tenant = "default"
    recipients: RecipientsIn
    title: Annotated[Line, Field(min_length=1, max_length=200)]
    body: Annotated[
        str, Field(max_length=4000, pattern=NO_CONTROL_BUT_WHITESPACE), AfterValidator(_multi_line)
    ] = ""
    severity: Severity = Severity.INFO
    category: Category | None = None
    source: Annotated[Line, Field(max_length=100)] | None = None
    display: Display = Display.BOTH
    data: Annotated[dict[str, JsonValue], AfterValidator(_small_json)] = Field(default_factory=dict)
    action_url: Annotated[
        str,
        Field(max_length=2000, pattern=r"^(https?://|/)[^\x00-\x1F\x7F-\x9F]*$"),
        AfterValidator(_single_line),
    ] | None = None
    actor: Ref | None = None
    target: Ref | None = None
    # Bounded so date arithmetic cannot overflow; `max_ttl_s` (a setting) is checked later.
    ttl: Annotated[int, Field(ge=1, le=MAX_TTL_FIELD_S)] | None = None
    expires_at: Time | None = None
    collapse_key: CollapseKey | None = None
    deliver_at: Time | None = None
    delay: Annotated[int, Field(ge=0, le=366 * 24 * 3600)] | None = None

    @model_validator(mode="after")
    def _one_schedule(self) -> PublishRequest:
        if self.deliver_at is not None and self.delay is not None:
            raise ValueError("give `deliver_at` or `delay`, not both")
        due = self.deliver_at
        if self.delay is not None:
            due = datetime.now(UTC) + timedelta(seconds=self.delay)
        if due is not None and self.expires_at is not None and self.expires_at <= due:
            # Caught here: at delivery time it would fail, and the message be retried forever.
            raise ValueError("`expires_at` must be after the delivery time")
        return self


class Accepted(BaseModel):
    id: str
    recipients: int
    scheduled_for: datetime | None = None


class PatchRequest(Strict):
    read: StrictBool | None = None
    seen: Literal[True] | None = None

    @model_validator(mode="after")
    def _something(self) -> PatchRequest:
        if self.read is None and self.seen is None:
            raise ValueError("give `read`, `seen` or both")
        return self


class ReadAllRequest(Strict):
    category: Category | None = None
    before: Time | None = None


class BulkRequest(Strict):
    ids: list[NotificationId] = Field(min_length=1, max_length=100)
    read: StrictBool | None = None
    seen: Literal[True] | None = None
    delete: Literal[True] | None = None

    @model_validator(mode="after")
    def _one_action(self) -> BulkRequest:
        if self.delete and (self.read is not None or self.seen is not None):
            raise ValueError("`delete` cannot be combined with `read` or `seen`")
        if not self.delete and self.read is None and self.seen is None:
            raise ValueError("give `read`, `seen` or `delete`")
        return self


class Updated(BaseModel):
    updated: int


class StreamToken(BaseModel):
    token: str
    expires_at: datetime


class GroupOut(BaseModel):
    name: str
    tenant: str
    members: int | None = None


class GroupList(BaseModel):
    groups: list[GroupOut]


class MembersChange(Strict):
    add: list[UserId] = Field(default_factory=list, max_length=10_000)
    remove: list[UserId] = Field(default_factory=list, max_length=10_000)


class MembersPage(BaseModel):
    members: list[str]
    next_cursor: str | None


class ApiKeyOut(BaseModel):
    name: str
    scope: str
    tenant: str | None
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyList(BaseModel):
    keys: list[ApiKeyOut]


class TopicMembersIn(Strict):
    users: list[UserId] = Field(default_factory=list, max_length=200_000)
    groups: list[Name] = Field(default_factory=list, max_length=1000)


class TopicPatch(Strict):
    add: TopicMembersIn = Field(default_factory=TopicMembersIn)
    remove: TopicMembersIn = Field(default_factory=TopicMembersIn)


class TopicOut(BaseModel):
    name: str
    tenant: str
    users: list[str]
    groups: list[str]


Relationship = Annotated[str, Field(min_length=1, max_length=64, pattern=TOKEN)]
Template = Annotated[str, Field(max_length=1000)]
MultiLine = Annotated[str, Field(pattern=NO_CONTROL_BUT_WHITESPACE), AfterValidator(_multi_line)]
"""Text kept in PostgreSQL, which cannot store NUL."""


class RuleRecipientIn(Strict):
    relationship: Relationship
    obtain: Literal["push", "pull"] = "push"
    title: Annotated[MultiLine, Field(min_length=1, max_length=1000)]
    body: Annotated[MultiLine, Field(max_length=8000)] = ""


class RuleIn(Strict):
    target_type: Annotated[str, Field(min_length=1, max_length=64, pattern=TOKEN)]
    recipients: list[RuleRecipientIn] = Field(min_length=1, max_length=20)

    @model_validator(mode="after")
    def _distinct(self) -> RuleIn:
        relationships = [r.relationship for r in self.recipients]
        if len(set(relationships)) != len(relationships):
            raise ValueError("recipients: one entry per relationship")
        return self


class RuleOut(RuleIn):
    name: str
    tenant: str


class EventIn(Strict):
    tenant: Tenant = "default"
    rule: Name
    actor: Ref
    target: Ref
    data: Annotated[dict[str, JsonValue], AfterValidator(_small_json)] = Field(default_factory=dict)


class EventAccepted(BaseModel):
    event_id: str
    notifications: int
    recipients: int
    errors: list[str]


class RelationshipIn(Strict):
    tenant: Tenant = "default"
    user: UserId
    relationship: Relationship
    target: Ref


class CategoryPreferenceIn(Strict):
    inbox: StrictBool = True
    push: StrictBool = True


class PreferencesIn(Strict):
    categories: dict[Category, CategoryPreferenceIn] = Field(
        default_factory=dict,
        max_length=200,
        json_schema_extra={"propertyNames": {"minLength": 1, "maxLength": 64, "pattern": TOKEN}},
    )


class SubscriptionOut(BaseModel):
    rule: str
    target: Ref
    relationship: str
    obtain: str


class SubscriptionList(BaseModel):
    subscriptions: list[SubscriptionOut]


class SubscriptionCancel(Strict):
    rule: Name
    target: Ref


class DelayedIn(Strict):
    tenant: Tenant = "default"
    topic: Name
    body: JsonValue = None
    delay_ms: Annotated[int, Field(ge=0, le=366 * 24 * 3600 * 1000)] | None = None
    due_at: Time | None = None
    priority: Annotated[int, Field(ge=0, le=9)] = 0
    ttl_ms: Annotated[int, Field(ge=100, le=24 * 3600 * 1000)] | None = None
    biz_key: Annotated[Line, Field(max_length=200)] | None = None

    @model_validator(mode="after")
    def _one_time(self) -> DelayedIn:
        if (self.delay_ms is None) == (self.due_at is None):
            raise ValueError("give exactly one of `delay_ms` and `due_at`")
        _storable(self.body)
        try:
            size = len(orjson.dumps(self.body))
        except orjson.JSONEncodeError as exc:
            raise ValueError("body: must be JSON without lone surrogates") from exc
        if size > 64 * 1024:
            raise ValueError(f"body: at most 65536 bytes serialized (got {size})")
        return self


class DelayedAccepted(BaseModel):
    id: str
    tenant: str
    due_at: datetime


class DelayedAck(Strict):
    receipt: Annotated[str, Field(min_length=1, max_length=200)]


Timestamp = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A time as responses write it: RFC 3339, UTC, millisecond precision, with a `Z`."""


class DelayedMessageOut(BaseModel):
    id: str
    tenant: str
    topic: str
    body: JsonValue
    priority: int
    ttl_ms: int
    biz_key: str | None
    due_at: Timestamp


class DelayedMessageState(DelayedMessageOut):
    status: DelayedStatus


class DelayedReserved(DelayedMessageOut):
    receipt: str
    """Present it to ack the message (stale once the message is offered again)."""


class DelayedPage(BaseModel):
    messages: list[DelayedReserved]


class Restored(BaseModel):
    restored: int
    """Messages re-queued in Redis."""
