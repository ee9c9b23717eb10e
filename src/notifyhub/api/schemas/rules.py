"""Bodies of rules and their previews, events, relationships and rule subscriptions."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from notifyhub.api.schemas.common import (
    NO_CONTROL_BUT_WHITESPACE,
    TOKEN,
    ULID_EXAMPLE,
    Channels,
    Documented,
    Line,
    Name,
    SmallJson,
    Strict,
    Tenant,
    UserId,
    examples,
    inbox_only,
    multi_line,
)
from notifyhub.api.schemas.digests import DigestIn
from notifyhub.api.schemas.escalation import Escalate
from notifyhub.domain.notification import Actor, Ref
from notifyhub.services.locales import LOCALE, MAX_TRANSLATIONS
from notifyhub.services.rules import RuleDefinition

Relationship = Annotated[str, Field(min_length=1, max_length=64, pattern=TOKEN)]
Template = Annotated[str, Field(max_length=1000)]
MultiLine = Annotated[str, Field(pattern=NO_CONTROL_BUT_WHITESPACE), AfterValidator(multi_line)]
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
    channels: Channels = Field(default_factory=inbox_only)
    """Where its notifications reach their users, as a publish's `channels`: the inbox
    always, and `email` and `push` (Web Push) when named."""
    digest: DigestIn | None = None
    """Its notifications' e-mails and pushes join each user's digest, as a publish's
    `digest` (its inbox copies share the thread `digest:<key>` unless the recipient entry
    names a `thread_key`)."""
    escalate: Escalate = Field(default_factory=list)
    """Its notifications' escalation steps, as a publish's `escalate`."""

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

    @classmethod
    def of(cls, found: RuleDefinition, tenant: str) -> RuleOut:
        """A stored rule as `GET /v1/admin/rules/{rule}` and the rules list show it."""
        return cls.model_validate(
            {
                "name": found.name,
                "tenant": tenant,
                "target_type": found.target_type,
                "recipients": [s.as_json() for s in found.recipients],
                "channels": found.channels_json,
                "digest": DigestIn.of(found.digest) if found.digest else None,
                "escalate": [s.model_dump() for s in found.escalate],
            }
        )


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
    """A page of the user's rule subscriptions, by rule, target id and relationship."""

    model_config = examples(
        {
            "subscriptions": [
                {
                    "rule": "comment_created_post",
                    "target": {"type": "post", "id": "p-981"},
                    "relationship": "follower",
                    "obtain": "pull",
                }
            ],
            "next_cursor": "comment_created_post/p-981/follower",
        }
    )

    subscriptions: list[SubscriptionOut]
    """Subscriptions, one per (rule, target, relationship), by rule, target id and
    relationship."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""


class SubscriptionCancel(Strict):
    """The subscription to cancel."""

    model_config = examples(
        {"rule": "comment_created_post", "target": {"type": "post", "id": "p-981"}}
    )

    rule: Name
    """The rule's name."""
    target: Ref
    """The target."""
