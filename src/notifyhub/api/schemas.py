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
    StrictInt,
    WithJsonSchema,
    model_validator,
)

from notifyhub.domain.notification import (
    MAX_ACTIONS,
    Action,
    Actor,
    Display,
    Ref,
    Severity,
    to_ms,
)
from notifyhub.services.delayed import Status as DelayedStatus
from notifyhub.services.locales import LOCALE, MAX_TRANSLATIONS

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


SmallJson = Annotated[dict[str, JsonValue], AfterValidator(_small_json)]
"""Any JSON object, up to 16 KiB serialized."""


Line = Annotated[str, Field(pattern=NO_CONTROL), AfterValidator(_single_line)]
Tenant = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
UserId = Annotated[Line, Field(min_length=1, max_length=200)]
Name = Annotated[str, Field(min_length=1, max_length=100, pattern=TOKEN)]
Category = Annotated[str, Field(min_length=1, max_length=64, pattern=TOKEN)]
Tag = Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z0-9][a-z0-9_-]*$")]
MAX_TAGS = 10


def _distinct(tags: list[str]) -> list[str]:
    if len(set(tags)) != len(tags):
        raise ValueError("tags must be distinct")
    return tags


Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS), AfterValidator(_distinct)]


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


ULID_EXAMPLE = "01JD3Q4M6T9W2Z8K5N7R1C0B3X"
"""The id every example uses: a ULID as the hub issues them."""
TIME_EXAMPLE = "2026-11-20T09:15:02.113Z"


def examples(*values: dict[str, Any]) -> ConfigDict:
    """A model's examples in its JSON schema (Swagger shows the first, never a value it
    would derive from a pattern)."""
    return ConfigDict(json_schema_extra={"examples": list(values)})


class Documented(BaseModel):
    """Fields are described by their attribute docstrings."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class Strict(Documented):
    """A request body: unknown fields are refused (422); its numbers and booleans are
    `StrictInt`, `StrictFloat` and `StrictBool` (a JSON string or a number in their place
    is a 422, never converted: tests/unit/test_strict_bodies.py walks every body)."""

    model_config = ConfigDict(extra="forbid")


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
        str, Field(max_length=4000, pattern=NO_CONTROL_BUT_WHITESPACE), AfterValidator(_multi_line)
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
            AfterValidator(_single_line),
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
    scheduled_for: datetime | None = None
    """When a scheduled notification will be delivered; null when delivered now."""


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
        """When the snooze ends (ms); 0 unsnoozes; None leaves it as it is."""
        if self.snooze is not None:
            return to_ms(now + timedelta(seconds=self.snooze))
        if "snoozed_until" not in self.model_fields_set:
            return None
        until = self.snoozed_until
        return 0 if until is None else to_ms(until)


class ReadAllRequest(Strict):
    """Mark every unread notification read, optionally only a category or older ones."""

    model_config = examples({}, {"category": "restock", "before": TIME_EXAMPLE})

    category: Category | None = None
    """Only notifications of this category."""
    before: Time | None = None
    """Only notifications created before this time (RFC 3339 or epoch milliseconds)."""


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


class StreamToken(Documented):
    """A short-lived token for `GET /v1/me/stream?access_token=...` (EventSource cannot
    send headers)."""

    model_config = examples(
        {
            "token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl",
            "expires_at": TIME_EXAMPLE,
        }
    )

    token: str
    """Valid for the stream only, and only until `expires_at`."""
    expires_at: datetime
    """When it stops being accepted (60 s after minting by default)."""


class GroupOut(Documented):
    """A group of users in a tenant."""

    model_config = examples({"name": "replenishers", "tenant": "default", "members": 12})

    name: str
    """The group's name."""
    tenant: str
    """Its tenant."""
    members: int | None = None
    """How many users it holds."""


class GroupList(Documented):
    """The tenant's groups."""

    model_config = examples(
        {"groups": [{"name": "replenishers", "tenant": "default", "members": 12}]}
    )

    groups: list[GroupOut]
    """Every group of the tenant, by name."""


class MembersChange(Strict):
    """Users to add to and remove from a group (adding one already there is a no-op)."""

    model_config = examples({"add": ["alice", "bob"], "remove": ["carol"]})

    add: list[UserId] = Field(default_factory=list, max_length=10_000)
    """User ids to add."""
    remove: list[UserId] = Field(default_factory=list, max_length=10_000)
    """User ids to remove."""


class MembersPage(Documented):
    """One page of a group's members, by user id."""

    model_config = examples({"members": ["alice", "bob"], "next_cursor": "bob"})

    members: list[str]
    """User ids, in order."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""


class ApiKeyOut(Documented):
    """An API key's public facts (never the key itself)."""

    model_config = examples(
        {
            "name": "wms-publisher",
            "scope": "publish",
            "tenant": "default",
            "created_at": TIME_EXAMPLE,
            "revoked_at": None,
        }
    )

    name: str
    """The name given at creation."""
    scope: str
    """`publish`, `consume` or `admin`."""
    tenant: str | None
    """The tenant it is bound to; null for a key of every tenant."""
    created_at: datetime
    """When it was created."""
    revoked_at: datetime | None
    """When it was revoked; null while it is valid."""


class ApiKeyList(Documented):
    """The API keys the caller may see (a tenant-bound key sees its tenant's)."""

    model_config = examples(
        {
            "keys": [
                {
                    "name": "wms-publisher",
                    "scope": "publish",
                    "tenant": "default",
                    "created_at": TIME_EXAMPLE,
                    "revoked_at": None,
                }
            ]
        }
    )

    keys: list[ApiKeyOut]
    """The keys, revoked ones included."""


class TopicMembersIn(Strict):
    """A topic's subscribers: users, and groups (whose members are subscribed)."""

    model_config = examples({"users": ["alice"], "groups": ["replenishers"]})

    users: list[UserId] = Field(default_factory=list, max_length=200_000)
    """Subscribed user ids."""
    groups: list[Name] = Field(default_factory=list, max_length=1000)
    """Subscribed groups of the tenant (an unknown one is a 422)."""


class TopicPatch(Strict):
    """Subscribers to add to and remove from a topic."""

    model_config = examples({"add": {"users": ["bob"]}, "remove": {"groups": ["replenishers"]}})

    add: TopicMembersIn = Field(default_factory=TopicMembersIn)
    """Users and groups to subscribe."""
    remove: TopicMembersIn = Field(default_factory=TopicMembersIn)
    """Users and groups to unsubscribe."""


class TopicOut(Documented):
    """A topic and its subscribers."""

    model_config = examples(
        {"name": "restock", "tenant": "default", "users": ["alice"], "groups": ["replenishers"]}
    )

    name: str
    """The topic's name."""
    tenant: str
    """Its tenant."""
    users: list[str]
    """Subscribed user ids."""
    groups: list[str]
    """Subscribed groups."""


Relationship = Annotated[str, Field(min_length=1, max_length=64, pattern=TOKEN)]
Template = Annotated[str, Field(max_length=1000)]
MultiLine = Annotated[str, Field(pattern=NO_CONTROL_BUT_WHITESPACE), AfterValidator(_multi_line)]
"""Text kept in PostgreSQL, which cannot store NUL."""


class TranslationIn(Strict):
    """One locale's `title` and `body` templates."""

    title: Annotated[MultiLine, Field(min_length=1, max_length=1000)]
    """The title's template in this language."""
    body: Annotated[MultiLine, Field(max_length=8000)] = ""
    """The body's template in this language."""


Translations = Annotated[
    dict[Annotated[str, Field(max_length=35, pattern=LOCALE)], TranslationIn],
    Field(
        max_length=MAX_TRANSLATIONS,
        json_schema_extra={"propertyNames": {"maxLength": 35, "pattern": LOCALE}},
    ),
]


class RuleRecipientIn(Strict):
    """What users of one relationship to the target get."""

    model_config = examples(
        {
            "relationship": "author",
            "obtain": "push",
            "title": "{{ actor.id }} commented on your post",
            "body": "{{ data.excerpt }}",
        }
    )

    relationship: Relationship
    """The users' relationship to the target (author, follower, admin, ...)."""
    obtain: Literal["push", "pull"] = "push"
    """`push`: a live event too; `pull`: the inbox only."""
    title: Annotated[MultiLine, Field(min_length=1, max_length=1000)]
    """The title's template: sandboxed Jinja2 over `actor`, `target` and `data`."""
    body: Annotated[MultiLine, Field(max_length=8000)] = ""
    """The body's template, like `title`."""
    thread_key: Annotated[Line, Field(min_length=1, max_length=1000)] | None = None
    """The notifications' thread key, a template like `title` (e.g.
    `{{ target.type }}:{{ target.id }}`): the target's activities become one thread item
    per user. Rendering to something that is no thread key is an error of the event."""
    locales: Translations | None = None
    """Translations of `title` and `body` by locale (`{"pt": {"title": ..., "body": ...}}`):
    each user gets the one their `locale` preference picks (`pt-BR` -> `pt` -> these
    defaults)."""


RULE_EXAMPLE: dict[str, Any] = {
    "target_type": "post",
    "recipients": [
        {
            "relationship": "author",
            "obtain": "push",
            "title": "{{ actor.id }} commented on your post",
            "body": "{{ data.excerpt }}",
        },
        {"relationship": "follower", "obtain": "pull", "title": "New comment on a post you follow"},
    ],
}


class RuleIn(Strict):
    """A rule (Design 3): on an event about a target of `target_type`, who gets what."""

    model_config = examples(RULE_EXAMPLE)

    target_type: Annotated[str, Field(min_length=1, max_length=64, pattern=TOKEN)]
    """The type of the targets the rule's events are about."""
    recipients: list[RuleRecipientIn] = Field(min_length=1, max_length=20)
    """One entry per relationship."""

    @model_validator(mode="after")
    def _distinct(self) -> RuleIn:
        relationships = [r.relationship for r in self.recipients]
        if len(set(relationships)) != len(relationships):
            raise ValueError("recipients: one entry per relationship")
        return self


class RuleOut(RuleIn):
    """A rule as stored."""

    model_config = examples({"name": "comment_created_post", "tenant": "default", **RULE_EXAMPLE})

    name: str
    """The rule's name."""
    tenant: str
    """Its tenant."""


class EventIn(Strict):
    """Something happened (Design 3): the rule's subscribers of the target are notified."""

    model_config = examples(
        {
            "tenant": "default",
            "rule": "comment_created_post",
            "actor": {"type": "user", "id": "alice"},
            "target": {"type": "post", "id": "p-981"},
            "data": {"excerpt": "Looks good to me"},
        }
    )

    tenant: Tenant = "default"
    """The tenant of the rule and the recipients."""
    rule: Name
    """The rule to apply (an unknown one is a 422)."""
    actor: Actor
    """Who did it (never notified of their own action unless a rule says `self`); its
    name and avatar reach the notifications."""
    target: Ref
    """What it was done to: its subscribers are the recipients."""
    data: SmallJson = Field(default_factory=dict)
    """Any JSON object, for the templates (and the notifications' `data`)."""


class EventAccepted(Documented):
    """What the event produced."""

    model_config = examples(
        {"event_id": ULID_EXAMPLE, "notifications": 2, "recipients": 5, "errors": []}
    )

    event_id: str
    """The event's ULID."""
    notifications: int
    """Notifications created (one per relationship with subscribers)."""
    recipients: int
    """Users who got one."""
    errors: list[str]
    """Templates that failed to render, by relationship (those users got nothing)."""


class RelationshipIn(Strict):
    """A user's relationship to a target: subscribes the user to every rule on that
    target type with that relationship."""

    model_config = examples(
        {
            "tenant": "default",
            "user": "alice",
            "relationship": "follower",
            "target": {"type": "post", "id": "p-981"},
        }
    )

    tenant: Tenant = "default"
    """The user's tenant."""
    user: UserId
    """The user's id."""
    relationship: Relationship
    """The relationship's name (author, follower, ...), as the rules name it."""
    target: Ref
    """The thing the user relates to."""


class CategoryPreferenceIn(Strict):
    """How one category reaches the user."""

    model_config = examples({"inbox": True, "push": False})

    inbox: StrictBool = True
    """`false` drops the category's notifications (unless `critical`)."""
    push: StrictBool = True
    """`false` keeps them in the inbox but sends no live `notification` event."""


class PreferencesIn(Strict):
    """The user's preferences, per category (categories not named get the defaults)."""

    model_config = examples(
        {"categories": {"restock": {"inbox": True, "push": False}}, "locale": "pt-BR"}
    )

    categories: dict[Category, CategoryPreferenceIn] = Field(
        default_factory=dict,
        max_length=200,
        json_schema_extra={"propertyNames": {"minLength": 1, "maxLength": 64, "pattern": TOKEN}},
    )
    """By category name; `PUT` replaces them all (left out: unchanged)."""
    locale: Annotated[str, Field(max_length=35, pattern=LOCALE)] | None = None
    """The user's language, a BCP 47 tag (`pt-BR`): rules and producers with translations
    send theirs, falling back `pt-BR` -> `pt` -> their default; null: the default (`PUT`
    with null clears it, without it leaves it unchanged)."""


class SubscriptionOut(Documented):
    """One rule subscription of the user."""

    model_config = examples(
        {
            "rule": "comment_created_post",
            "target": {"type": "post", "id": "p-981"},
            "relationship": "follower",
            "obtain": "pull",
        }
    )

    rule: str
    """The rule's name."""
    target: Ref
    """The target the user relates to."""
    relationship: str
    """The user's relationship to it."""
    obtain: str
    """`push` or `pull`, as the rule says for that relationship."""


class SubscriptionList(Documented):
    """The user's rule subscriptions."""

    model_config = examples(
        {
            "subscriptions": [
                {
                    "rule": "comment_created_post",
                    "target": {"type": "post", "id": "p-981"},
                    "relationship": "follower",
                    "obtain": "pull",
                }
            ]
        }
    )

    subscriptions: list[SubscriptionOut]
    """Every subscription, one per (rule, target)."""


class SubscriptionCancel(Strict):
    """The subscription to cancel."""

    model_config = examples(
        {"rule": "comment_created_post", "target": {"type": "post", "id": "p-981"}}
    )

    rule: Name
    """The rule's name."""
    target: Ref
    """The target."""


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
    """Due at this time (RFC 3339 or epoch milliseconds)."""
    priority: Annotated[StrictInt, Field(ge=0, le=9)] = 0
    """Higher first among messages equally due."""
    ttl_ms: Annotated[StrictInt, Field(ge=100, le=24 * 3600 * 1000)] | None = None
    """How long a consumer may hold it before it is offered again (default: configured)."""
    biz_key: Annotated[Line, Field(max_length=200)] | None = None
    """Your own reference (an order number), returned with the message."""

    @model_validator(mode="after")
    def _one_time(self) -> DelayedIn:
        if (self.queue is None) == (self.topic is None):
            raise ValueError("give `queue` (or its deprecated name `topic`), exactly once")
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
    due_at: datetime
    """When it becomes ready for consumers."""


class DelayedAck(Strict):
    """The receipt of a message taken from its queue."""

    model_config = examples({"receipt": "r-01JD3Q7Z0Y1X2W3V4T5S6R7Q8P"})

    receipt: Annotated[str, Field(min_length=1, max_length=200)]
    """The `receipt` the message came with."""


Timestamp = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A time as responses write it: RFC 3339, UTC, millisecond precision, with a `Z`."""

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


class StreamUpdate(Documented):
    """The data of an `update` event: a notification's read/seen state changed."""

    model_config = examples(
        {"id": ULID_EXAMPLE, "status": "read", "seen": True, "read_at": TIME_EXAMPLE}
    )

    id: str
    """The notification's id."""
    status: Literal["unread", "read"]
    """Its status now."""
    seen: bool
    """Whether it is seen now."""
    read_at: Timestamp | None
    """When it was read; null when unread."""


class StreamDelete(Documented):
    """The data of a `delete` event: a notification left the inbox (deleted, recalled,
    expired, evicted, or replaced by one with the same collapse key)."""

    model_config = examples({"id": ULID_EXAMPLE})

    id: str
    """The notification's id."""


class StreamViewCount(Documented):
    """One view's counts in a `counts` or `reset` event."""

    unread: int
    """Unread notifications in the view."""
    unseen: int
    """Notifications in the view not yet seen."""
    total: int
    """Notifications in the view (archived and snoozed ones are in no count)."""
    exact: bool = True
    """Present, and false, while the view is being recounted after its definition changed
    (its counts then follow the definition before): on a new stream's first counts or a
    `reset`, and on the stream's counts until the recount reaches the user (a `counts`
    event without it follows). A stream resumed with `Last-Event-ID` does not mark it."""


class StreamCounts(Documented):
    """The data of a `counts` event (after every change) and of a `reset` event."""

    model_config = examples(
        {"unread": 3, "unseen": 1, "total": 17, "seq": 42},
        {
            "unread": 3,
            "unseen": 1,
            "total": 17,
            "seq": 43,
            "views": {"mentions": {"unread": 1, "unseen": 0, "total": 4, "exact": False}},
        },
    )

    unread: int
    """Unread notifications."""
    unseen: int
    """Notifications not yet seen."""
    total: int
    """Notifications in the inbox."""
    seq: int
    """The change these counts are as of (the event's `id:` without its epoch)."""
    views: dict[str, StreamViewCount] | None = None
    """Each of the user's views' (tabs') counts, by name; absent when they have none."""


ViewName = Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z0-9][a-z0-9_-]*$")]
"""A view's name: a lowercase slug, the key of its counts (`counts.views`) and `?view=`."""


class ViewFilterIn(Strict):
    """Which notifications a view holds: all of what is given must hold (an empty filter
    holds every notification). It is over what a notification carries for good, so a
    notification's views are known when it is stored."""

    model_config = examples(
        {"tags_any": ["mention"]},
        {"categories": ["billing", "invoices"], "severity_at_least": "warning"},
    )

    categories: list[Category] = Field(default_factory=list, max_length=MAX_TAGS)
    """One of these categories (up to 10)."""
    tags_any: Tags = Field(default_factory=list)
    """At least one of these tags (up to 10)."""
    tags_all: Tags = Field(default_factory=list)
    """Every one of these tags (up to 10)."""
    severity_at_least: Severity | None = None
    """This severity or a higher one (info < success < warning < error < critical)."""


class ViewIn(Strict):
    """A view (tab) to create or replace."""

    model_config = examples(
        {"filter": {"tags_any": ["mention"]}, "label": "Mentions"},
        {"filter": {"severity_at_least": "error"}, "label": "Alarms"},
    )

    filter: ViewFilterIn
    """Which notifications it holds."""
    label: Annotated[str, AfterValidator(_single_line)] | None = Field(
        None, min_length=1, max_length=64
    )
    """What a front end shows as the tab's title (the name when absent)."""


class ViewOut(Documented):
    """One view (tab)."""

    model_config = examples(
        {
            "name": "mentions",
            "label": "Mentions",
            "filter": {"tags_any": ["mention"]},
            "scope": "personal",
            "updated_at": TIME_EXAMPLE,
        }
    )

    name: str
    """Its name: the key of its counts in `counts.views` and the `?view=` of its list."""
    label: str | None
    """Its title for a front end (null: show the name)."""
    filter: dict[str, Any]
    """Its filter (`ViewFilterIn`), only what is set."""
    scope: Literal["tenant", "personal"]
    """`tenant`: an admin defined it for every user of the tenant; `personal`: the user's own."""
    updated_at: datetime | None
    """When it was last created or changed."""


class ViewList(Documented):
    """Views (tabs), the tenant's first, each set by name."""

    model_config = examples(
        {
            "views": [
                {
                    "name": "alarms",
                    "label": "Alarms",
                    "filter": {"severity_at_least": "error"},
                    "scope": "tenant",
                    "updated_at": TIME_EXAMPLE,
                }
            ]
        }
    )

    views: list[ViewOut]
    next_cursor: str | None = None
    """The admin list's next page (`?cursor=`); null on the last page and for a user's
    own list (never paged)."""
