"""Bodies of publishing a notification (`POST /v1/notifications`) and previewing its recipients."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictInt, model_validator

from notifyhub.api.schemas.common import (
    NO_CONTROL_BUT_WHITESPACE,
    TIME_EXAMPLE,
    ULID_EXAMPLE,
    Category,
    Channels,
    Documented,
    Instant,
    Line,
    Name,
    SmallJson,
    Strict,
    Tags,
    Tenant,
    Time,
    UserId,
    examples,
    inbox_only,
    multi_line,
    single_line,
)
from notifyhub.api.schemas.digests import DigestIn
from notifyhub.api.schemas.escalation import Escalate
from notifyhub.domain.notification import MAX_ACTIONS, Action, Actor, Display, Ref, Severity


class RecipientsIn(Strict):
    """Who gets the notification; a user named by several routes gets one copy. At least
    one list must be non-empty; an unknown group or topic is a 422 naming it."""

    model_config = examples({"users": ["alice", "bob"], "groups": ["replenishers"], "topics": []})

    users: list[UserId] = Field(default_factory=list, max_length=10_000)
    """User ids, as the calling application knows them."""
    groups: list[Name] = Field(default_factory=list, max_length=100)
    """Groups of the tenant: each member gets a copy."""
    topics: list[Name] = Field(default_factory=list, max_length=100)
    """Topics of the tenant: each subscribed user and group member gets a copy."""


PUBLISH_EXAMPLE: dict[str, Any] = {
    "tenant": "default",
    "recipients": {"users": ["alice"], "groups": ["replenishers"]},
    "title": "Restock location A-12",
    "body": "Stock went to -4 after picking wave 42",
    "severity": "warning",
    "category": "restock",
    "source": "wms-picking",
    "display": "inbox",
    "data": {"location": "A-12", "qty": -4},
    "action_url": "https://wms.example/locations/A-12",
    "actor": {"type": "user", "id": "u-7", "name": "Ana Lima"},
    "target": {"type": "location", "id": "A-12"},
    "ttl": 1800,
    "collapse_key": "restock:A-12",
    "tags": ["restock", "zone-a"],
}


_HTML = re.compile(r"<[A-Za-z!/?]")
_LINK_TARGET = re.compile(r"\]\(\s*<?\s*([^\s)>]*)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:", re.MULTILINE)
_AUTOLINK_SCHEMES = re.compile(r"(?i)\b(javascript|vbscript|data|file):")


def safe_markdown(body: str) -> str | None:
    """Why `body` is not in the markdown subset clients render (emphasis, code, http(s)
    links, lists); None when it is. Clients sanitise what they render as well: this
    refuses what would only ever be an attack or a surprise."""
    if found := _HTML.search(body):
        return (
            f"markdown may not contain HTML (found {body[found.start() : found.start() + 12]!r}); "
            "write `&lt;` for a literal '<'"
        )
    if found := _REFERENCE.search(body):
        return "markdown reference links ([name]: url) are not in the subset; use [text](url)"
    for target in _LINK_TARGET.findall(body):
        if not target.lower().startswith(("https://", "http://")):
            return f"markdown links must be http(s) URLs (found {target[:40]!r})"
    if found := _AUTOLINK_SCHEMES.search(body):
        return f"markdown may not name a {found[1].lower()}: URL"
    return None


def _distinct_ids(actions: list[Action]) -> list[Action]:
    if len({action.id for action in actions}) != len(actions):
        raise ValueError("action ids must be distinct")
    return actions


Actions = Annotated[list[Action], Field(max_length=MAX_ACTIONS), AfterValidator(_distinct_ids)]
ThreadKey = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/@-]+$")]
CollapseKey = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/@-]+$")]
MAX_TTL_FIELD_S = 100 * 366 * 24 * 3600


class PublishRequest(Strict):
    """A notification to publish: its content, its recipients, and optionally its expiry
    and when to deliver it."""

    model_config = examples(PUBLISH_EXAMPLE, {"recipients": {"users": ["alice"]}, "title": "Hi"})

    tenant: Tenant = "default"
    """The tenant the notification and its recipients belong to."""
    recipients: RecipientsIn
    """Users, groups and topics to deliver to."""
    title: Annotated[Line, Field(min_length=1, max_length=200)]
    """One line shown in the inbox."""
    body: Annotated[
        str, Field(max_length=4000, pattern=NO_CONTROL_BUT_WHITESPACE), AfterValidator(multi_line)
    ] = ""
    """Longer text; line breaks allowed."""
    body_format: Literal["text", "markdown"] = "text"
    """`text` (the default), or `markdown`: the subset clients render (emphasis, `code`,
    [links](https://...) to http(s) only, lists). HTML, other link schemes and reference
    links are a 422."""
    severity: Severity = Severity.INFO
    """How urgent: `critical` also overrides a user's `inbox: false` preference."""
    category: Category | None = None
    """A short label users set preferences by (e.g. `restock`)."""
    source: Annotated[Line, Field(max_length=100)] | None = None
    """Which system sent it (e.g. `wms-picking`)."""
    display: Display = Display.BOTH
    """Where clients show it: in the inbox list, as a toast, or both."""
    data: SmallJson = Field(default_factory=dict)
    """Any JSON object for the client, up to 16 KiB serialized."""
    action_url: (
        Annotated[
            str,
            Field(max_length=2000, pattern=r"^(https?://|/)[^\x00-\x1F\x7F-\x9F]*$"),
            AfterValidator(single_line),
        ]
        | None
    ) = None
    """Where a click leads: an http(s) URL or an absolute path."""
    actor: Actor | None = None
    """Who or what caused it: `{id, name?, avatar_url?, type?}` (type `user` by default);
    clients show the name and avatar."""
    target: Ref | None = None
    """What it is about."""
    # Bounded so date arithmetic cannot overflow; `max_ttl_s` (a setting) is checked later.
    ttl: Annotated[StrictInt, Field(ge=1, le=MAX_TTL_FIELD_S)] | None = None
    """Seconds until it expires (default: the configured TTL, 30 days)."""
    expires_at: Time | None = None
    """When it expires, instead of `ttl`: RFC 3339 or epoch milliseconds."""
    collapse_key: CollapseKey | None = None
    """A later notification with the same key replaces this one in each user's inbox."""
    tags: Tags = Field(default_factory=list)
    """Up to 10 distinct labels (lowercase slugs, e.g. `mention`, `billing`) that lists
    (`tags_any`, `tags_all`) filter by."""
    thread_key: ThreadKey | None = None
    """Copies with this key join each user's open thread with it (one item per
    conversation: its `thread` counts the activities and their actors, it shows the latest
    and comes back unread on top) instead of adding items; not with `collapse_key`."""
    thread_window_s: Annotated[StrictInt, Field(ge=1, le=30 * 86400)] | None = None
    """How long after a thread's first activity this notification may still join it
    (default 86400, a day); later, it starts a new thread."""
    actions: Actions = Field(default_factory=list)
    """Up to 3 buttons with distinct ids; the user completes one of them once
    (`POST /v1/me/notifications/{id}/actions/{action_id}`), optionally calling a delivery
    definition (`webhook`)."""
    channels: Channels = Field(default_factory=inbox_only)
    """Where it reaches its users: always their inbox; `email` also e-mails each user with
    an address, through the tenant's `email` delivery definition; `push` also sends a Web
    Push to each of their browsers' subscriptions (through the `push` definition). Each
    user's preferences decide per category and channel; `severity: critical` bypasses
    their opt-outs (not a missing address). Every e-mail and push is an outbox delivery."""
    digest: DigestIn | None = None
    """Its e-mails and pushes join each user's digest under `digest.key`: one message per
    window instead of one per notification (docs/attention.md); its inbox copies share
    the thread `digest:<key>` unless it names a `thread_key`."""
    escalate: Escalate = Field(default_factory=list)
    """Up to 5 escalation steps: each sends the notification on `email` or `push` after
    `after_s` seconds, unless the user's copy is `seen`, `read` or `archived` by then
    (or deleted, recalled, expired). Without it, the tenant's default for the category
    applies (`PUT /v1/admin/escalation-defaults`)."""
    deliver_at: Time | None = None
    """Deliver later, at this time (RFC 3339 or epoch milliseconds); not with `delay`."""
    delay: Annotated[StrictInt, Field(ge=0, le=366 * 24 * 3600)] | None = None
    """Deliver later, after this many seconds; not with `deliver_at`."""

    @model_validator(mode="after")
    def _thread(self) -> PublishRequest:
        if self.thread_key is not None and self.collapse_key is not None:
            raise ValueError("give `thread_key` or `collapse_key`, not both")
        if self.thread_window_s is not None and self.thread_key is None:
            raise ValueError("`thread_window_s` needs a `thread_key`")
        return self

    @model_validator(mode="after")
    def _markdown_subset(self) -> PublishRequest:
        if self.body_format == "markdown" and (why := safe_markdown(self.body)):
            raise ValueError(f"body: {why}")
        return self

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


class PublishAccepted(Documented):
    """The notification is committed: its id, and how many users it reached."""

    model_config = examples(
        {"id": ULID_EXAMPLE, "recipients": 14, "scheduled_for": None},
        {"id": ULID_EXAMPLE, "recipients": 0, "scheduled_for": TIME_EXAMPLE},
    )

    id: str
    """The notification's ULID (recall it with `DELETE /v1/notifications/{id}`)."""
    recipients: int
    """Users who got a copy (0 while it is scheduled)."""
    scheduled_for: Instant | None = None
    """When a scheduled notification will be delivered; null when delivered now."""


class RecipientsPreviewIn(Strict):
    """Recipients to resolve without sending anything (the console's broadcast composer
    shows the count before the operator confirms)."""

    model_config = examples({"tenant": "default", "recipients": {"groups": ["replenishers"]}})

    tenant: Tenant = "default"
    """The tenant whose users, groups and topics are meant."""
    recipients: RecipientsIn
    """Users, groups and topics, as in `POST /v1/notifications`."""


class RecipientsPreviewOut(Documented):
    """How many users a publish to these recipients would reach now (before preferences,
    which may drop a category), and the first of them."""

    model_config = examples({"tenant": "default", "users": 13, "sample": ["alice", "bob"]})

    tenant: str
    users: int
    sample: list[str]
    """The first 20 user ids, in resolution order (users named, then groups, then topics)."""
