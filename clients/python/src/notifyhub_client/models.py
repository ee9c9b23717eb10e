"""Typed bodies of the notifyhub API, mirroring the hub's OpenAPI schemas.

Requests refuse unknown fields (a typo fails here, not at the hub) and naive datetimes
(the client does not guess a timezone); responses ignore fields a newer hub adds, in the
parts they share with requests too (`Known[...]`: an `Actor` built by a caller refuses a
typo, an `Actor` in an answer takes a field it does not know). The hub's test suite
compares every model below with the OpenAPI document
(tests/clients/test_python_client_models.py), so a drift fails there.
Constraints (lengths, patterns) are left to the hub: its 422 names the field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, GetCoreSchemaHandler, JsonValue
from pydantic_core import CoreSchema, core_schema

Severity = Literal["info", "success", "warning", "error", "critical"]
Display = Literal["inbox", "toast", "both"]
Channel = Literal["inbox", "email", "push"]
Obtain = Literal["push", "pull"]
AlertTrigger = Literal["final_failure", "every_failure", "never", "after_n"]
DelayedStatus = Literal["delayed", "ready", "reserved", "consumed", "cancelled"]
DeliveryStatus = Literal["pending", "sent", "failed", "final_failed", "awaiting_confirm"]


class Request(BaseModel):
    """A request body: unknown fields are refused, unset ones are not sent."""

    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class Response(BaseModel):
    """A response body: fields a newer hub adds are ignored."""

    model_config = ConfigDict(extra="ignore")


class IgnoreUnknown:
    """Marks a request part (it refuses unknown fields when built) inside an answer: there
    the fields it does not know are dropped before it is validated, as a `Response` drops
    them, so a newer hub adding one breaks no older client."""

    def __get_pydantic_core_schema__(
        self, source: type[BaseModel], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        known = {f.alias or name for name, f in source.model_fields.items()} | set(
            source.model_fields
        )

        def drop_unknown(value: Any) -> Any:
            if isinstance(value, dict):
                return {key: item for key, item in value.items() if key in known}
            return value

        return core_schema.no_info_before_validator_function(drop_unknown, handler(source))


P = TypeVar("P", bound=BaseModel)
Known = Annotated[P, IgnoreUnknown()]
"""A request part as an answer's field: `Known[Actor]`."""


class Ref(Request):
    """An actor or a target: `{"type": "user", "id": "u-7"}` (in answers: `Known[Ref]`)."""

    type: str
    id: str


class Actor(Request):
    """Who caused it: `{"id": "ana", "name": "Ana Lima", "avatar_url": "https://..."}`
    (`type` is `user` unless given; in answers: `Known[Actor]`)."""

    type: str = "user"
    id: str
    name: str | None = None
    avatar_url: str | None = None


class Action(Request):
    """A button on a notification: `{"id": "approve", "label": "Approve"}`; the user
    completes one of a notification's actions once (in answers: `Known[Action]`)."""

    id: str
    label: str
    url: str | None = None
    webhook: str | None = None
    """A delivery definition told of the completion (`type: "action.completed"`)."""
    style: Literal["primary", "secondary", "danger"] = "secondary"


class Thread(Response):
    """A thread item's activities: how many, who (latest 10 distinct), when."""

    key: str
    latest_id: str
    """The id of the activity the item shows."""
    activity_count: int
    actors: list[Known[Actor]]
    first_at: datetime
    last_at: datetime


class Completed(Response):
    """Which action the user completed, and when."""

    action: str
    completed_at: datetime


# --- Requests ----------------------------------------------------------------------


class Recipients(Request):
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list)


class PublishRequest(Request):
    tenant: str | None = None
    recipients: Recipients
    title: str
    body: str | None = None
    body_format: Literal["text", "markdown"] | None = None
    severity: Severity | None = None
    category: str | None = None
    source: str | None = None
    display: Display | None = None
    data: dict[str, JsonValue] | None = None
    action_url: str | None = None
    actor: Actor | None = None
    target: Ref | None = None
    ttl: int | None = None
    expires_at: AwareDatetime | None = None
    collapse_key: str | None = None
    tags: list[str] | None = None
    thread_key: str | None = None
    thread_window_s: int | None = None
    actions: list[Action] | None = None
    channels: list[Channel] | None = None
    digest: dict[str, JsonValue] | None = None
    """`{"key", "window_s", "max_items", "mode", "first", "at"}` (docs/attention.md)."""
    escalate: list[dict[str, JsonValue]] | None = None
    """Steps `{"after_s", "unless", "channel"}` (docs/attention.md)."""
    deliver_at: AwareDatetime | None = None
    delay: int | None = None


class EventRequest(Request):
    tenant: str | None = None
    rule: str
    actor: Actor
    target: Ref
    data: dict[str, JsonValue] | None = None


class RelationshipRequest(Request):
    tenant: str | None = None
    user: str
    relationship: str
    target: Ref


class DelayedRequest(Request):
    tenant: str | None = None
    queue: str | None = None
    topic: str | None = None
    """Deprecated spelling of `queue` (the hub takes one of the two)."""
    body: JsonValue = None
    delay_ms: int | None = None
    due_at: AwareDatetime | None = None
    priority: int | None = None
    ttl_ms: int | None = None
    biz_key: str | None = None


class ReadAllRequest(Request):
    """Mark a user's unread notifications read: all, or those matching every filter given."""

    category: str | None = None
    before: AwareDatetime | None = None
    view: str | None = None
    """One of the user's views (tabs): only what its list (`?view=`) shows."""


class AckRequest(Request):
    receipt: str


class DeliveryRequest(Request):
    tenant: str | None = None
    definition: str
    payload: dict[str, JsonValue]
    description: str | None = None


class MembersChange(Request):
    add: list[str] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)


class TopicMembers(Request):
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)


class RuleRecipient(Request):
    """One relationship's message in a rule (also how a rule's GET/PUT answer lists them)."""

    relationship: str
    obtain: Obtain = "push"
    title: str
    body: str = ""
    thread_key: str | None = None
    """A template: the notifications' thread key (`{{ target.type }}:{{ target.id }}`)."""
    locales: dict[str, dict[str, str]] | None = None
    """Translations by locale: `{"pt": {"title": ..., "body": ...}}`."""


class RuleRequest(Request):
    target_type: str
    recipients: list[RuleRecipient]
    channels: list[Channel] | None = None
    digest: dict[str, JsonValue] | None = None
    escalate: list[dict[str, JsonValue]] | None = None


class Alert(Request):
    """When and whom a delivery definition alerts (also part of its answer)."""

    trigger: AlertTrigger = "final_failure"
    after_n: int | None = None
    emails: list[str] = Field(default_factory=list)
    webhook_url: str | None = None


class EmailTarget(Request):
    """An `email` definition's recipients (empty: the payload's `to`) and message:
    sandboxed templates over the delivery's payload (also part of its answer)."""

    subject: str
    text: str
    html: str | None = None
    to: list[str] = Field(default_factory=list)
    locales: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Messages by locale: `{"de": {"subject": ..., "text": ..., "html": ...}}`."""


class RabbitTarget(Request):
    """A `rabbitmq` definition's exchange and routing key (also part of its answer)."""

    exchange: str
    routing_key: str = ""


class DefinitionRequest(Request):
    tenant: str | None = None
    kind: Literal["webhook", "email", "rabbitmq"] | None = None
    url: str | None = None
    email: EmailTarget | None = None
    rabbitmq: RabbitTarget | None = None
    timeout_s: float | None = None
    retry_intervals: str | None = None
    max_retries: int | None = None
    alert: Alert | None = None
    need_confirm: bool | None = None
    max_confirm_delay_s: int | None = None
    rotate_secret: bool | None = None
    drop_previous_secret: bool | None = None


# --- Responses ---------------------------------------------------------------------


class Accepted(Response):
    """A publish's 202: the notification id, users reached, and when it is scheduled for."""

    id: str
    recipients: int
    scheduled_for: datetime | None = None


class EventAccepted(Response):
    event_id: str
    notifications: int
    recipients: int
    errors: list[str]


class Notification(Response):
    """One user's copy of a notification (the inbox item; a stream's `notification` data)."""

    id: str
    tenant: str
    title: str
    body: str = ""
    body_format: Literal["text", "markdown"] = "text"
    severity: Severity = "info"
    category: str | None = None
    source: str | None = None
    display: Display = "both"
    data: dict[str, JsonValue] = Field(default_factory=dict)
    action_url: str | None = None
    actor: Known[Actor] | None = None
    target: Known[Ref] | None = None
    created_at: datetime
    expires_at: datetime
    collapse_key: str | None = None
    tags: list[str] = Field(default_factory=list)
    thread_key: str | None = None
    thread_window_s: int | None = None
    status: str = "unread"
    seen: bool = False
    read_at: datetime | None = None
    archived: bool = False
    pinned: bool = False
    snoozed_until: datetime | None = None
    actions: list[Known[Action]] = Field(default_factory=list)
    completed: Completed | None = None
    """The action this user completed; null before."""
    thread: Thread | None = None
    """Set when it is a thread (a `thread_key`)."""
    replaces: str | None = None
    """Stream only: the id of the notification this one replaced (same `collapse_key`)."""
    resurfaced: bool = False
    """Stream only: a snoozed copy whose time came (unread again, on top), not a new one."""


class Updated(Response):
    """How many notifications a bulk change (read-all) changed."""

    updated: int


class ViewCount(Response):
    """One view's (tab's) counts."""

    unread: int
    unseen: int
    total: int
    exact: bool = True
    """False while the view is being recounted after its definition changed."""


class Counts(Response):
    unread: int
    unseen: int
    total: int
    views: dict[str, ViewCount] = Field(default_factory=dict)
    """Per view (tab) the user has: its counts."""
    seq: int | None = None
    """Stream only: the change seq these counts are as of."""


class InboxUpdate(Response):
    """A stream's `update` data: one item's new state; or, when `thread` is set (an
    activity joined the thread), the whole item as it now is, every field set (`item`
    gives it as a `Notification`)."""

    id: str
    status: str
    seen: bool
    read_at: datetime | None
    archived: bool = False
    pinned: bool = False
    snoozed_until: datetime | None = None
    completed: Completed | None = None
    """Set by the update of an action's completion (and a thread's: the item's); other
    updates leave it as it was."""
    thread: Thread | None = None
    """Set when an activity joined the thread: the fields below are then the item's."""
    tenant: str | None = None
    title: str | None = None
    body: str | None = None
    body_format: Literal["text", "markdown"] | None = None
    severity: Severity | None = None
    category: str | None = None
    source: str | None = None
    display: Display | None = None
    data: dict[str, JsonValue] | None = None
    action_url: str | None = None
    actor: Known[Actor] | None = None
    target: Known[Ref] | None = None
    created_at: datetime | None = None
    expires_at: datetime | None = None
    collapse_key: str | None = None
    tags: list[str] | None = None
    thread_key: str | None = None
    thread_window_s: int | None = None
    actions: list[Known[Action]] | None = None

    @property
    def item(self) -> Notification | None:
        """A thread's update as the item it carries (to replace the one shown); None for
        a state update."""
        if self.thread is None:
            return None
        return Notification.model_validate(self.model_dump(exclude_unset=True))


class Deleted(Response):
    """A stream's `delete` data."""

    id: str


class Group(Response):
    name: str
    tenant: str
    members: int | None = None


class Topic(Response):
    name: str
    tenant: str
    users: list[str]
    groups: list[str]


def _inbox_only() -> list[Channel]:
    return ["inbox"]


class Rule(Response):
    name: str
    tenant: str
    target_type: str
    recipients: list[Known[RuleRecipient]]
    channels: list[Channel] = Field(default_factory=_inbox_only)
    digest: dict[str, JsonValue] | None = None
    escalate: list[dict[str, JsonValue]] = Field(default_factory=list)


class DelayedAccepted(Response):
    id: str
    tenant: str
    due_at: datetime


class QueueMessage(Response):
    """A delayed message as a consumer receives it, with the `receipt` its ack needs."""

    id: str
    tenant: str
    queue: str
    topic: str
    """Deprecated: the same as `queue`, for one release."""
    body: JsonValue
    priority: int
    ttl_ms: int
    biz_key: str | None
    due_at: datetime
    receipt: str


class DelayedMessage(Response):
    """`GET /v1/delayed/{id}`: the message and where it is in its life."""

    id: str
    tenant: str
    queue: str
    topic: str
    """Deprecated: the same as `queue`, for one release."""
    body: JsonValue
    priority: int
    ttl_ms: int
    biz_key: str | None
    due_at: datetime
    status: DelayedStatus


class DeliveryAccepted(Response):
    id: str
    tenant: str
    status: DeliveryStatus


class DeliveryAttempt(Response):
    attempt: int
    at: datetime
    status_code: int | None = None
    error: str | None = None
    duration_ms: float


class Delivery(Response):
    id: str
    tenant: str
    definition: str
    status: DeliveryStatus
    payload: dict[str, JsonValue]
    description: str | None
    failures: int
    created_at: datetime
    last_attempt_at: datetime | None
    next_attempt_at: datetime | None
    last_error: str | None
    finished_at: datetime | None
    attempts: list[DeliveryAttempt]


class DeliveryDefinition(Response):
    tenant: str
    name: str
    kind: str
    url: str | None
    email: Known[EmailTarget] | None
    rabbitmq: Known[RabbitTarget] | None
    timeout_s: float
    retry_intervals: str
    max_retries: int
    alert: Known[Alert]
    need_confirm: bool
    max_confirm_delay_s: int
    disabled: bool
    rotating: bool
    secret: str | None = None
    """The signing secret (`whsec_...`): only on creation and rotation."""
    warnings: list[str] | None = None
    """On `PUT` only: notes about URLs that were stored but not checked (a host name
    that does not resolve yet)."""


class Problem(Response):
    """An RFC 9457 problem (`application/problem+json`), as every error is answered."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, str]] | None = None
