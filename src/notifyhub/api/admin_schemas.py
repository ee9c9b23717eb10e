"""Request and response bodies of the admin API's keys, lists, user lookup and audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from notifyhub.api.delivery_schemas import DefinitionOut
from notifyhub.api.schemas import (
    RULE_EXAMPLE,
    TIME_EXAMPLE,
    ULID_EXAMPLE,
    ApiKeyOut,
    Documented,
    Name,
    PreferencesIn,
    RecipientsIn,
    RuleIn,
    RuleOut,
    SmallJson,
    Strict,
    SubscriptionOut,
    Tenant,
    Timestamp,
    examples,
)
from notifyhub.domain.auth import Scope
from notifyhub.domain.delivery import DeliveryStatus
from notifyhub.domain.notification import Actor, Counts, Ref

_KEY_OUT = {
    "name": "wms-consumer",
    "scope": "consume",
    "tenant": "default",
    "created_at": TIME_EXAMPLE,
    "revoked_at": None,
}


class ApiKeyIn(Strict):
    """A new API key: its name (unique across the hub), scope and tenant."""

    model_config = examples({"name": "wms-consumer", "scope": "consume", "tenant": "default"})

    name: Name
    """A unique name for the key (409 when taken)."""
    scope: Scope
    """`publish`, `consume` or `admin` (admin admits every scope)."""
    tenant: Tenant | None = None
    """The tenant it is bound to; null (only for an unbound admin key) makes a key of
    every tenant. A tenant-bound admin key may only name its own tenant."""


class ApiKeyCreated(ApiKeyOut):
    """The key just made, with its secret: shown this once, never again."""

    model_config = examples(
        {**_KEY_OUT, "key": "nh_3f9a1c2b7d4e_x4Zb9q7VdC1mN0pLkR2sT5uW8yA3eG6hJ"}
    )

    key: str
    """The secret to send as `Authorization: Bearer <key>`; store it now."""


class AuditEntryOut(Documented):
    """One admin action."""

    model_config = examples(
        {
            "id": 1042,
            "at": TIME_EXAMPLE,
            "tenant": "default",
            "key_name": "ops-admin",
            "key_tenant": None,
            "method": "PUT",
            "route": "/v1/admin/groups/{group}",
            "target": "replenishers",
            "status": 201,
        }
    )

    id: int
    """The entry's number (entries are numbered as they are written)."""
    at: datetime
    """When the action ended."""
    tenant: str
    """The tenant acted on; `*` for an action of no one tenant (by an unbound key)."""
    key_name: str
    """The name of the API key that made the request."""
    key_tenant: str | None
    """The tenant that key is bound to; null for an unbound key."""
    method: str
    """The HTTP method."""
    route: str
    """The route's template, as in the API reference."""
    target: str | None
    """What the route named: its path parameters joined with `/`, or the created key's
    name; null when it named nothing."""
    status: int
    """The HTTP status it was answered with (refusals are recorded too)."""


class AuditPage(Documented):
    """A page of the audit log, newest first."""

    model_config = examples(
        {
            "entries": [
                {
                    "id": 1042,
                    "at": TIME_EXAMPLE,
                    "tenant": "default",
                    "key_name": "ops-admin",
                    "key_tenant": None,
                    "method": "PUT",
                    "route": "/v1/admin/groups/{group}",
                    "target": "replenishers",
                    "status": 201,
                }
            ],
            "next_cursor": "1042",
        }
    )

    entries: list[AuditEntryOut]
    """Entries, newest first."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""


class TopicSummary(Documented):
    """A topic and how many subscribers it has."""

    model_config = examples(
        {"name": "restock", "tenant": "default", "user_count": 120, "group_count": 2}
    )

    name: str
    """The topic's name."""
    tenant: str
    """Its tenant."""
    user_count: int
    """Users subscribed by name."""
    group_count: int
    """Groups subscribed (their members are not counted here)."""


class TopicPage(Documented):
    """A page of the tenant's topics, by name."""

    model_config = examples(
        {
            "topics": [
                {"name": "restock", "tenant": "default", "user_count": 120, "group_count": 2}
            ],
            "next_cursor": "restock",
        }
    )

    topics: list[TopicSummary]
    """Topics, by name."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""


class RulePage(Documented):
    """A page of the tenant's rules, by name."""

    model_config = examples(
        {
            "rules": [{"name": "comment_created_post", "tenant": "default", **RULE_EXAMPLE}],
            "next_cursor": "comment_created_post",
        }
    )

    rules: list[RuleOut]
    """Rules, by name, as `GET /v1/admin/rules/{rule}` shows each."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""


_DEFINITION = {
    "tenant": "default",
    "name": "erp-orders",
    "url": "https://erp.example/hooks/notifyhub",
    "timeout_s": 10.0,
    "retry_intervals": "5s,5m,1h,1d",
    "max_retries": 5,
    "alert": {"trigger": "final_failure", "after_n": None, "emails": [], "webhook_url": None},
    "need_confirm": False,
    "max_confirm_delay_s": 300,
    "disabled": False,
    "rotating": False,
}


class DefinitionPage(Documented):
    """A page of the tenant's delivery definitions, by name (never their secrets)."""

    model_config = examples({"definitions": [_DEFINITION], "next_cursor": "erp-orders"})

    definitions: list[DefinitionOut]
    """Definitions, by name, as `GET /v1/admin/delivery-definitions/{name}` shows each."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""


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


_DELIVERY = {
    "id": ULID_EXAMPLE,
    "tenant": "default",
    "definition": "erp-orders",
    "status": "final_failed",
    "description": "SO-1042 shipped",
    "failures": 6,
    "created_at": TIME_EXAMPLE,
    "last_attempt_at": TIME_EXAMPLE,
    "next_attempt_at": None,
    "last_error": "HTTP 503",
    "finished_at": TIME_EXAMPLE,
}


class DeliverySummary(Documented):
    """A delivery without its payload and attempts (`GET /v1/deliveries/{id}` has them)."""

    model_config = examples(_DELIVERY)

    id: str
    """The delivery's ULID."""
    tenant: str
    """Its tenant."""
    definition: str
    """The definition it is sent through."""
    status: DeliveryStatus
    """pending, sent, failed, final_failed or awaiting_confirm."""
    description: str | None
    """The note given at creation."""
    failures: int
    """Failed attempts so far."""
    created_at: Timestamp | None
    """When it was created."""
    last_attempt_at: Timestamp | None
    """When it was last tried."""
    next_attempt_at: Timestamp | None
    """When it is tried next; null once finished."""
    last_error: str | None
    """What went wrong last."""
    finished_at: Timestamp | None
    """When it was sent (confirmed) or finally failed."""


class DeliveryPage(Documented):
    """A page of the tenant's deliveries, newest first, live and archived."""

    model_config = examples({"deliveries": [_DELIVERY], "next_cursor": ULID_EXAMPLE})

    deliveries: list[DeliverySummary]
    """Deliveries, newest first."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""


_SUBSCRIPTION = {
    "rule": "comment_created_post",
    "target": {"type": "post", "id": "p-981"},
    "relationship": "follower",
    "obtain": "pull",
}


class TokensRevoked(Documented):
    """A user's tokens revoked: those issued at or before `not_before` are refused."""

    model_config = examples({"tenant": "default", "user": "alice", "not_before": TIME_EXAMPLE})

    tenant: str
    """The user's tenant."""
    user: str
    """The user id."""
    not_before: datetime
    """The user's tokens issued (`iat`) at or before this second, and tokens without
    `iat`, are refused (401); their streams opened with such tokens have ended, in every
    hub process. A later revocation moves it on, never back."""


class UserOut(Documented):
    """One user as the hub holds them now."""

    model_config = examples(
        {
            "tenant": "default",
            "user": "alice",
            "counts": {"unread": 3, "unseen": 1, "total": 17},
            "seq": 42,
            "streams_open": 2,
            "preferences": {"categories": {"restock": {"inbox": True, "push": False}}},
            "subscriptions": [_SUBSCRIPTION],
            "groups": ["replenishers"],
            "topics": ["restock"],
        }
    )

    tenant: str
    """The user's tenant."""
    user: str
    """The user id, as the calling application knows it."""
    counts: Counts
    """Their inbox's counts."""
    seq: int
    """The seq of their last inbox change (0: none yet); a stream's event ids carry it."""
    streams_open: int
    """Streams open for them now, in every hub process, as each process last reported
    them (at most `NOTIFYHUB_STREAM__PRESENCE_INTERVAL_S`, 5 s, old)."""
    preferences: PreferencesIn
    """Their per-category preferences (categories not named get the defaults)."""
    subscriptions: list[SubscriptionOut]
    """Their rule subscriptions."""
    groups: list[str]
    """The groups holding them, by name (the first 1000)."""
    topics: list[str]
    """The topics subscribing them, by name or through one of their groups (the first
    1000)."""


class TraceLineOut(Documented):
    """What routing decided for one recipient."""

    model_config = examples(
        {
            "user": "alice",
            "source": "group:replenishers",
            "outcome": "delivered",
            "seq": 42,
            "streamed_to": 1,
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


class TraceNow(Documented):
    """`?user=`: that user's copy as it stands now."""

    in_inbox: bool
    """The copy is in the user's inbox now (false: never stored, deleted, recalled,
    expired, evicted or replaced)."""
    status: Literal["unread", "read"] | None
    archived: bool | None
    snoozed_until: datetime | None
    expired: bool
    """The notification's expiry has passed."""
    streams_open: int
    """The user's event streams open now, in every hub process."""


class TraceOut(Documented):
    """A notification's routing trace: who was named, how many recipients each outcome
    had, and a line per recipient (the first `routing_trace_users`; `?user=` for one)."""

    model_config = examples(
        {
            "id": "01JD3Q4M6T9W2Z8K5N7R1C0B3X",
            "tenant": "default",
            "created_at": "2026-11-20T09:15:02.113000+00:00",
            "expires_at": "2026-12-20T09:15:02.113000+00:00",
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
    created_at: datetime
    expires_at: datetime
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
    recalled_at: datetime | None
    lines: list[TraceLineOut]
    """By user id: the first 100, or `?user=`'s alone."""
    now: TraceNow | None = None
    """With `?user=`: that user's copy now."""


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


class RulePreviewIn(Strict):
    """A rule (saved or not) and a sample event to render its templates against."""

    model_config = examples(
        {
            "rule": RULE_EXAMPLE,
            "actor": {"type": "user", "id": "alice"},
            "target": {"type": "post", "id": "p-981"},
            "data": {"excerpt": "Looks good to me"},
        }
    )

    rule: RuleIn
    """The rule's definition, as `PUT /v1/admin/rules/{rule}` takes it."""
    name: Name = "preview"
    """The rule's name (a title that renders empty falls back to it)."""
    actor: Actor
    """The sample event's actor."""
    target: Ref
    """The sample event's target."""
    data: SmallJson = Field(default_factory=dict)
    """The sample event's data."""


class RenderedOut(Documented):
    """One relationship's message for the sample event."""

    relationship: str
    obtain: Literal["push", "pull"]
    title: str
    body: str
    error: str | None
    """Why its templates failed at render time (the event would skip these recipients)."""


class RulePreviewOut(Documented):
    """Each relationship's message, rendered as `POST /v1/events` would; nothing stored."""

    model_config = examples(
        {
            "recipients": [
                {
                    "relationship": "author",
                    "obtain": "push",
                    "title": "alice commented on your post",
                    "body": "Looks good to me",
                    "error": None,
                }
            ]
        }
    )

    recipients: list[RenderedOut]
