"""The notification, a user's copy of it, counts and inbox change events."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PlainSerializer, field_validator

from notifyhub.domain.digest import Digest
from notifyhub.domain.escalation import Step

NotificationStatus = Literal["unread", "read"]
BodyFormat = Literal["text", "markdown"]
"""How clients render `body`: as plain text, or as the safe markdown subset."""
PRINTABLE = r"^[^\x00-\x1F\x7F-\x9F]*$"
"""No control characters (Unicode Cc)."""


def to_rfc3339(value: datetime) -> str:
    """UTC with millisecond precision and a `Z`, as every response carries times."""
    if value.tzinfo is UTC:  # the hub's own times: no conversion, and "+00:00" is last
        return value.isoformat(timespec="milliseconds")[:-6] + "Z"
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


Timestamp = Annotated[datetime, PlainSerializer(to_rfc3339, return_type=str)]


CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Unicode categories Cc (control characters, NUL among them) and Cs (lone surrogates):
what one line of text may not hold."""
CONTROL_BUT_WHITESPACE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
"""The same, allowing CR, LF and TAB: what longer text may not hold."""


def no_lone_surrogates(value: str | None) -> str | None:
    """Text stored in PostgreSQL, which refuses NUL (the patterns) and lone surrogates."""
    if value is not None and any("\ud800" <= ch <= "\udfff" for ch in value):
        raise ValueError("must not contain lone surrogates")
    return value


class Severity(StrEnum):
    INFO = "info"
    SUCCESS = "success"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


class Channel(StrEnum):
    """Where a notification reaches its users: every copy is in the inbox; `email` and
    `push` (Web Push) are the channels beyond it (services/channels.py)."""

    INBOX = "inbox"
    EMAIL = "email"
    PUSH = "push"


def extra_channels(channels: Iterable[str]) -> tuple[str, ...]:
    """The channels beyond the inbox among `channels`, each once, in a stable order."""
    named = set(channels)
    return tuple(c.value for c in (Channel.EMAIL, Channel.PUSH) if c.value in named)


SEVERITY_RANK = {severity: rank for rank, severity in enumerate(Severity, start=1)}
"""Severities in order, as the inbox scripts compare them (lua/common.lua RANK)."""


class Display(StrEnum):
    INBOX = "inbox"
    TOAST = "toast"
    BOTH = "both"


class Ref(BaseModel):
    """A typed reference to something outside notifyhub: an actor or a target."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        json_schema_extra={"examples": [{"type": "location", "id": "A-12"}]},
    )

    type: str = Field(min_length=1, max_length=64, pattern=PRINTABLE)
    """What kind of thing: `user`, `order`, `location`..."""
    id: str = Field(min_length=1, max_length=200, pattern=PRINTABLE)
    """Its id in the calling application."""

    _no_surrogates = field_validator("type", "id")(no_lone_surrogates)


MAX_AVATAR_URL = 2048
"""An avatar URL's most characters: a `data:` one is stored in every recipient's copy, so
a small image (about 1.5 KB)."""
AVATAR_URL = (
    r"^(https://[^\s\x00-\x1F\x7F-\x9F\"'<>\\]+"
    r"|data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2})$"
)
"""An https URL, or a raster image as a base64 data: URL (no SVG: it can carry script)."""


class Actor(Ref):
    """Who caused it, as a client shows them: a name and an avatar beside the reference."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"id": "ana", "name": "Ana Lima", "avatar_url": "https://example.com/ana.png"}
            ]
        }
    )

    type: str = Field(default="user", min_length=1, max_length=64, pattern=PRINTABLE)
    """What kind of actor: `user` (the default), `service`, `bot`..."""
    name: str | None = Field(default=None, min_length=1, max_length=100, pattern=PRINTABLE)
    """How a client names them."""
    avatar_url: str | None = Field(default=None, max_length=MAX_AVATAR_URL, pattern=AVATAR_URL)
    """Their picture: an https URL, or a small `data:image/(png|jpeg|gif|webp);base64,...`
    URL (either at most 2048 characters; no SVG, which can carry script)."""

    _name_surrogates = field_validator("name")(no_lone_surrogates)


MAX_ACTIONS = 3
"""Buttons one notification may carry."""


class ActionStyle(StrEnum):
    PRIMARY = "primary"
    SECONDARY = "secondary"
    DANGER = "danger"


class Action(BaseModel):
    """A button on a notification. A user completes one of their copy's actions once (an
    approve-or-reject choice): `POST /v1/me/notifications/{id}/actions/{action_id}`."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        json_schema_extra={
            "examples": [
                {"id": "approve", "label": "Approve", "style": "primary", "webhook": "approvals"}
            ]
        },
    )

    id: str = Field(min_length=1, max_length=32, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    """Unique within the notification: a lowercase slug (`approve`, `snooze-1h`)."""
    label: str = Field(min_length=1, max_length=60, pattern=PRINTABLE)
    """The button's text."""
    url: str | None = Field(
        default=None, max_length=2000, pattern=r"^(https?://|/)[^\x00-\x1F\x7F-\x9F]*$"
    )
    """Where the client goes after completing it: an http(s) URL or an absolute path."""
    webhook: str | None = Field(
        default=None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:-]+$"
    )
    """A delivery definition of the tenant: completing the action enqueues one signed
    delivery to it (`type: "action.completed"`, the user, notification and action)."""
    style: ActionStyle = ActionStyle.SECONDARY
    """How the client draws it: primary, secondary or danger."""

    _no_surrogates = field_validator("label")(no_lone_surrogates)


DEFAULT_THREAD_WINDOW_S = 86400


class Thread(BaseModel):
    """One conversation in one user's inbox: every notification with its key within the
    window of its first, counted once."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    key: str
    """The notifications' `thread_key`."""
    latest_id: str
    """The id of the activity the item shows (its content and actions)."""
    activity_count: int
    """How many notifications joined it (the first included)."""
    actors: list[Actor]
    """Who caused them: the latest 10 distinct, the latest first."""
    first_at: Timestamp
    """When its first activity was created."""
    last_at: Timestamp
    """When its latest activity was created."""


class Completed(BaseModel):
    """Which of a copy's actions its user completed, and when."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    action: str
    """The action's id."""
    completed_at: Timestamp
    """When the user completed it."""


ITEM_EXAMPLE: dict[str, Any] = {
    "id": "01JD3Q4M6T9W2Z8K5N7R1C0B3X",
    "tenant": "default",
    "title": "Restock location A-12",
    "body": "Stock went to -4 after picking wave 42",
    "severity": "warning",
    "category": "restock",
    "source": "wms-picking",
    "display": "inbox",
    "data": {"location": "A-12", "qty": -4},
    "action_url": "https://wms.example/locations/A-12",
    "actor": {"type": "user", "id": "u-7"},
    "target": {"type": "location", "id": "A-12"},
    "created_at": "2026-11-20T09:15:02.113Z",
    "expires_at": "2026-11-20T09:45:02.113Z",
    "collapse_key": None,
    "tags": ["restock", "zone-a"],
    "status": "unread",
    "seen": False,
    "read_at": None,
    "archived": False,
    "pinned": False,
    "snoozed_until": None,
    "actions": [],
    "completed": None,
    "thread": None,
}
"""A user's copy as the inbox API and the stream's `notification` event show it."""


class Notification(BaseModel):
    """One message as sent; every recipient's copy shares this content."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    id: str
    """A ULID (time-sortable), issued by the hub."""
    tenant: str
    """Its tenant."""
    title: str
    """One line, 1..200 characters."""
    body: str = ""
    """Longer text, up to 4000 characters."""
    body_format: BodyFormat = "text"
    """`text`, or `markdown`: emphasis, code, http(s) links and lists, rendered by the
    client (notifyhub.js `renderBody`) through a sanitiser."""
    severity: Severity = Severity.INFO
    """info, success, warning, error or critical."""
    category: str | None = None
    """A short label preferences are set by."""
    source: str | None = None
    """Which system sent it."""
    display: Display = Display.BOTH
    """Where clients show it: inbox, toast or both."""
    data: dict[str, JsonValue] = Field(default_factory=dict)
    """The publisher's JSON object, as sent."""
    action_url: str | None = None
    """Where a click leads."""
    actor: Actor | None = None
    """Who or what caused it (a name and an avatar for clients to show)."""
    target: Ref | None = None
    """What it is about."""
    created_at: Timestamp
    """When it was published."""
    expires_at: Timestamp
    """When it disappears from every inbox."""
    collapse_key: str | None = None
    """A later notification with this key replaces it."""
    tags: tuple[str, ...] = ()
    """Up to 10 short labels (slugs) that lists and views filter by."""
    actions: tuple[Action, ...] = ()
    """Up to 3 buttons; the user completes one of them once."""
    thread_key: str | None = None
    """Copies with the same key join each user's open thread instead of adding items."""
    thread_window_s: int | None = None
    """How long after a thread's first activity this one may still join it (default a
    day)."""

    def content_json(self) -> bytes:
        """What every copy stores as its content (JSON): without `actions`, `body_format`
        and the thread fields at their defaults, so content stays as it was before they
        existed."""
        return self.model_dump_json(exclude=_defaults_left_out(self)).encode()


def _defaults_left_out(notification: Notification) -> set[str] | None:
    left_out = {
        name
        for name, default in (
            ("actions", ()),
            ("body_format", "text"),
            ("thread_key", None),
            ("thread_window_s", None),
        )
        if getattr(notification, name) == default
    }
    return left_out or None


class InboxItem(Notification):
    """A user's copy: the shared content plus that user's state."""

    model_config = ConfigDict(json_schema_extra={"examples": [ITEM_EXAMPLE]})

    status: NotificationStatus = "unread"
    """unread or read, for this user."""
    seen: bool = False
    """Whether this user has seen it (in a list, a toast)."""
    read_at: Timestamp | None = None
    """When this user read it; null when unread."""
    archived: bool = False
    """Archived by this user: out of the default list and the counts, listed by
    `status=archived`."""
    pinned: bool = False
    """Pinned by this user: first in the default list."""
    snoozed_until: Timestamp | None = None
    """Snoozed by this user until then: out of the default list and the counts (listed by
    `status=snoozed`), back unread at that time; null when not snoozed."""
    completed: Completed | None = None
    """The action this user completed (its other actions are closed); null before."""
    thread: Thread | None = None
    """When it is a thread (a `thread_key`): its activities so far; the item shows the
    latest one's content. Null for a single notification."""


class ViewCount(BaseModel):
    """One view's (tab's) counts: what its list holds."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    unread: int
    """Unread notifications in the view."""
    unseen: int
    """Notifications in the view not yet seen."""
    total: int
    """Notifications in the view (archived and snoozed ones are in no count)."""
    exact: bool = True
    """False while the view's counts are being recomputed after its definition changed
    (they then follow the definition before)."""


class Counts(BaseModel):
    """The user's inbox counts."""

    model_config = ConfigDict(
        frozen=True,
        use_attribute_docstrings=True,
        json_schema_extra={
            "examples": [
                {
                    "unread": 3,
                    "unseen": 1,
                    "total": 17,
                    "views": {"mentions": {"unread": 1, "unseen": 0, "total": 4, "exact": True}},
                }
            ]
        },
    )

    unread: int
    """Unread notifications."""
    unseen: int
    """Notifications not yet seen."""
    total: int
    """Notifications in the inbox (archived and snoozed ones are in no count)."""
    views: dict[str, ViewCount] = Field(default_factory=dict)
    """Per view (tab) the user has, the tenant's and their own: its counts, kept in the
    same script as every change that moves them. Always present: `{}` for a user with
    no views."""


class InboxPage(BaseModel):
    """One page of the user's inbox."""

    model_config = ConfigDict(
        use_attribute_docstrings=True,
        json_schema_extra={
            "examples": [{"items": [ITEM_EXAMPLE], "next_cursor": None, "unread": 3}]
        },
    )

    items: list[InboxItem]
    """Newest first (oldest first with `since`)."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""
    unread: int
    """The user's unread count."""


_ACTIVITY_EXAMPLE: dict[str, Any] = {
    **{k: v for k, v in ITEM_EXAMPLE.items() if k in Notification.model_fields},
    "title": "Ana commented on your post",
    "actor": {"type": "user", "id": "ana", "name": "Ana Lima", "avatar_url": None},
    "thread_key": "post:p1:comments",
}


class ActivityPage(BaseModel):
    """A page of one item's activities, the latest first: a thread's (the latest 100 are
    kept), or a single notification's one."""

    model_config = ConfigDict(
        use_attribute_docstrings=True,
        json_schema_extra={"examples": [{"items": [_ACTIVITY_EXAMPLE], "next_cursor": None}]},
    )

    items: list[Notification]
    """Each activity as it was published."""
    next_cursor: str | None
    """Pass as `cursor` for the next (older) page; null on the last."""


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
    body_format: BodyFormat = "text"
    severity: Severity = Severity.INFO
    category: str | None = None
    source: str | None = None
    display: Display = Display.BOTH
    data: dict[str, JsonValue] = Field(default_factory=dict)
    action_url: str | None = None
    actor: Actor | None = None
    target: Ref | None = None
    collapse_key: str | None = None
    tags: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()
    thread_key: str | None = None
    thread_window_s: int | None = None
    ttl_s: int | None = None
    expires_at: datetime | None = None
    deliver_at: datetime | None = None
    channels: tuple[str, ...] = ()
    """The channels beyond the inbox (`email`, `push`: `extra_channels`); () inbox only."""
    digest: Digest | None = None
    """Its e-mails and pushes join the user's digest under this spec (domain/digest.py)."""
    escalate: tuple[Step, ...] = ()
    """Escalation steps (domain/escalation.py); () none of its own."""
