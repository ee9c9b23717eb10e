"""SQLAlchemy models: API keys, groups and their members."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from notifyhub.db.base import Base


class ApiKey(Base):
    """A service API key. Names are unique per tenant; hub-wide keys (no tenant) share
    one namespace of their own (the index reads a missing tenant as '', never a tenant)."""

    __tablename__ = "api_keys"
    __table_args__ = (
        Index("uq_api_keys_tenant_name", func.coalesce(text("tenant"), ""), "name", unique=True),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    key_prefix: Mapped[str] = mapped_column(String(16), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    scope: Mapped[str] = mapped_column(String(16))
    tenant: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Group(Base):
    __tablename__ = "groups"
    __table_args__ = (UniqueConstraint("tenant", "name", name="uq_groups_tenant_name"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class GroupMember(Base):
    __tablename__ = "group_members"

    group_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)


class Topic(Base):
    """A topic: a subscription list (say, a message type + warehouse -> users and roles)."""

    __tablename__ = "topics"
    __table_args__ = (UniqueConstraint("tenant", "name", name="uq_topics_tenant_name"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(100))
    version: Mapped[int] = mapped_column(
        BigInteger, server_default=text("nextval('topic_version_seq')")
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TopicMember(Base):
    __tablename__ = "topic_members"

    topic_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("topics.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(8), primary_key=True)  # user | group
    member: Mapped[str] = mapped_column(String(200), primary_key=True)


class Rule(Base):
    """A rule: an `executor_action[_target]` phrase on a target type, and who gets what."""

    __tablename__ = "rules"
    __table_args__ = (UniqueConstraint("tenant", "name", name="uq_rules_tenant_name"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(100))
    target_type: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    channels: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    """Channels beyond the inbox its notifications reach (`email`, `push`; migration 0016)."""
    digest: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    """Its notifications' digest spec (domain/digest.py `Digest`, JSON), if any."""
    escalate: Mapped[list[Any]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    """Its notifications' escalation steps (domain/escalation.py `Step`; migration 0017)."""


class RuleRecipient(Base):
    """Per relationship: how a rule's message is obtained and what it says."""

    __tablename__ = "rule_recipients"

    rule_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("rules.id", ondelete="CASCADE"), primary_key=True
    )
    relationship: Mapped[str] = mapped_column(String(64), primary_key=True)
    obtain: Mapped[str] = mapped_column(String(8))  # push | pull
    title: Mapped[str] = mapped_column(String(1000))
    body: Mapped[str] = mapped_column(String(8000), default="")
    thread_key: Mapped[str | None] = mapped_column(String(1000))
    """A template: the notifications' thread key (migration 0011)."""
    locales: Mapped[Any] = mapped_column(JSONB, nullable=True)
    """Translations: {locale: {title, body}} templates (migration 0012)."""


class Relationship(Base):
    """A user's relationship to a concrete resource (author, follower, friend, admin...)."""

    __tablename__ = "relationships"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    target_type: Mapped[str] = mapped_column(String(64), primary_key=True)
    target_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    relationship: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class SubscriptionOptOut(Base):
    """A user's cancelled subscription to one rule on one target."""

    __tablename__ = "subscription_opt_outs"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    rule_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("rules.id", ondelete="CASCADE"), primary_key=True
    )
    target_id: Mapped[str] = mapped_column(String(200), primary_key=True)


class Preference(Base):
    """Per user and category, one switch per channel: keep in the inbox? e-mail it?
    push it (live stream event and Web Push)?"""

    __tablename__ = "preferences"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    category: Mapped[str] = mapped_column(String(64), primary_key=True)
    inbox: Mapped[bool] = mapped_column(default=True)
    push: Mapped[bool] = mapped_column(default=True)
    email: Mapped[bool] = mapped_column(default=True, server_default=text("true"))
    """Migration 0016."""


class PreferenceDefault(Base):
    """A tenant's default switches for a category, for users without a row of their own
    for it (the channel worker's e-mail and push decisions: services/channels.py)."""

    __tablename__ = "preference_defaults"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    category: Mapped[str] = mapped_column(String(64), primary_key=True)
    inbox: Mapped[bool] = mapped_column()
    email: Mapped[bool] = mapped_column()
    push: Mapped[bool] = mapped_column()


class ChannelSend(Base):
    """A notification's sends beyond the inbox, committed with its publish: the worker
    (workers/channels.py) expands it, a chunk of users at a time, into outbox deliveries;
    `expanded` users are done; `done_at` once all are."""

    __tablename__ = "channel_sends"
    __table_args__ = (
        Index("ix_channel_sends_open", "created_at", postgresql_where=text("done_at IS NULL")),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    """The notification's id."""
    tenant: Mapped[str] = mapped_column(String(64))
    notification: Mapped[Any] = mapped_column(JSONB)
    """The notification as its copies show it (JSON)."""
    channels: Mapped[list[str]] = mapped_column(JSONB)
    users: Mapped[list[str]] = mapped_column(JSONB)
    """The recipients, in resolution order."""
    push_ttl_named: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=text("false")
    )
    """The publish named an expiry (`ttl`, `expires_at`): pushes live until it (else a day)."""
    expanded: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Chunks of it that failed in a row; it waits until `retry_at` after each."""
    retry_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    digest: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    """The publish's digest spec (JSON), if any: its e-mails and pushes join digests."""


class UserLocale(Base):
    """A user's language (BCP 47), which picks rules' and producers' translations."""

    __tablename__ = "user_locales"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    locale: Mapped[str] = mapped_column(String(35))


class UserProfile(Base):
    """A user's addresses (migration 0015): where e-mail reaches them, their time zone.
    Their locale stays in `user_locales`."""

    __tablename__ = "user_profiles"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    email: Mapped[str | None] = mapped_column(String(254))
    time_zone: Mapped[str | None] = mapped_column(String(64))
    """An IANA name (`Europe/Lisbon`)."""
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class PushSubscription(Base):
    """One browser's Web Push subscription (`PushSubscription.toJSON()`) for one user."""

    __tablename__ = "push_subscriptions"
    __table_args__ = (
        UniqueConstraint("tenant", "endpoint", name="uq_push_subscriptions_endpoint"),
        Index("ix_push_subscriptions_user", "tenant", "user_id"),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[str] = mapped_column(String(200))
    endpoint: Mapped[str] = mapped_column(Text)
    """The push service's URL for this browser (a capability: never shown to others)."""
    p256dh: Mapped[str] = mapped_column(String(100))
    """The browser's P-256 public key, base64url (65 bytes decoded)."""
    auth: Mapped[str] = mapped_column(String(32))
    """The browser's auth secret, base64url (16 bytes decoded)."""
    expiration_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    user_agent: Mapped[str | None] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class VapidKey(Base):
    """The hub installation's VAPID key pair (RFC 8292): one row, id 1, made by the first
    hub to start, so every process and restart signs with the same key."""

    __tablename__ = "vapid_keys"
    __table_args__ = (CheckConstraint("id = 1", name="ck_vapid_keys_one"),)

    id: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    private_key: Mapped[str] = mapped_column(Text)
    """The private key, PEM (PKCS#8); never returned by the API."""
    public_key: Mapped[str] = mapped_column(String(100))
    """The public key, base64url of the uncompressed P-256 point (what browsers need)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TokenRevocation(Base):
    """A user's "not before": their tokens issued at or before it are refused (the durable
    copy of Redis's `<p>token-nbf`, store/revocations.py)."""

    __tablename__ = "token_revocations"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    not_before: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class DelayedMessage(Base):
    """The delayed queue's recovery log: the whole message, and its last known status."""

    __tablename__ = "delayed_messages"

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    """The queue is (tenant, queue); a scheduled notification's tenant is the notification's."""
    queue: Mapped[str] = mapped_column("topic", String(100), index=True)
    """The queue's name (the column kept its first name, `topic`)."""
    body: Mapped[Any] = mapped_column(JSONB)
    priority: Mapped[int] = mapped_column(SmallInteger)
    ttl_ms: Mapped[int] = mapped_column(Integer)
    biz_key: Mapped[str | None] = mapped_column(String(200))
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    status: Mapped[str] = mapped_column(String(16), index=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When it was consumed or cancelled; NULL while not finished. The retention sweep
    removes the message `delayed.retention_s` after it (partial index: finished rows only)."""

    __table_args__ = (
        Index(
            "ix_delayed_messages_finished_at",
            "finished_at",
            postgresql_where=text("finished_at IS NOT NULL"),
        ),
        # the messages about one object (a copy's snooze wake-ups): repositories/delayed.py
        Index("ix_delayed_messages_body_id", "tenant", "topic", text("(body ->> 'id')")),
    )


class DelayedTransition(Base):
    """Every status change: which set moved it, on which worker and host."""

    __tablename__ = "delayed_transitions"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    message_id: Mapped[str] = mapped_column(String(26), index=True)
    status: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    set_index: Mapped[int | None] = mapped_column(SmallInteger)
    worker: Mapped[str | None] = mapped_column(String(100))
    host: Mapped[str | None] = mapped_column(String(200))


class DeliveryDefinition(Base):
    """A delivery definition: where a kind of delivery goes, its retries, who hears of failures."""

    __tablename__ = "delivery_definitions"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    """Names are per tenant: two tenants may each have their own `order-paid`."""
    kind: Mapped[str] = mapped_column(String(16), server_default="webhook")
    """The target kind: `webhook` (POST to `url`), `email` or `rabbitmq` (as that column says)."""
    url: Mapped[str] = mapped_column(String(2000))
    """The webhook receiver; empty for other kinds."""
    email: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    """For `email`: recipients and subject/text/html templates (per locale too)."""
    rabbitmq: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    """For `rabbitmq`: the `exchange` and `routing_key` published to."""
    timeout_s: Mapped[float] = mapped_column(Float)
    retry_intervals: Mapped[str] = mapped_column(String(500))
    max_retries: Mapped[int] = mapped_column(Integer)
    alert_trigger: Mapped[str] = mapped_column(String(16))
    alert_after_n: Mapped[int | None] = mapped_column(Integer)
    alert_emails: Mapped[list[str]] = mapped_column(JSONB)
    alert_webhook_url: Mapped[str | None] = mapped_column(String(2000))
    need_confirm: Mapped[bool] = mapped_column(Boolean)
    max_confirm_delay_s: Mapped[int] = mapped_column(Integer)
    secret: Mapped[str] = mapped_column(String(200))
    previous_secret: Mapped[str | None] = mapped_column(String(200))
    """Set during a rotation: every attempt is signed with both until it is cleared."""
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """Set when a receiver answered 410 Gone; a PUT enables the definition again."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class _DeliveryColumns:
    """The columns shared, in the same order, by the live table and its history."""

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    definition: Mapped[str] = mapped_column(String(100))
    """The name of a definition of this delivery's `tenant`."""
    payload: Mapped[Any] = mapped_column(JSONB)
    description: Mapped[str | None] = mapped_column(String(1000))
    status: Mapped[str] = mapped_column(String(16))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    """The fencing token: bumped by every claim; only its holder may settle."""
    failures: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    """When the row is next due; while an attempt is in flight, its lease's end."""
    last_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    tenant: Mapped[str] = mapped_column(String(64))
    """Last, as migration 0006 appended it: the history move copies rows by position."""


class Delivery(_DeliveryColumns, Base):
    """The outbox: one row per delivery that is not yet finished (or recently finished)."""

    __tablename__ = "deliveries"
    __table_args__ = (
        Index(
            "ix_deliveries_due",
            "next_attempt_at",
            postgresql_where=text("status IN ('pending', 'failed', 'awaiting_confirm')"),
        ),
        Index(
            "ix_deliveries_finished",
            "finished_at",
            postgresql_where=text("finished_at IS NOT NULL"),
        ),
    )


class DeliveryHistory(_DeliveryColumns, Base):
    """Finished deliveries moved out of the outbox after a configurable age."""

    __tablename__ = "delivery_history"


class DeliveryAttempt(Base):
    """One settled attempt: when, which HTTP status, what went wrong."""

    __tablename__ = "delivery_attempts"
    __table_args__ = (UniqueConstraint("delivery_id", "attempt", name="uq_delivery_attempts"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    delivery_id: Mapped[str] = mapped_column(String(26))
    attempt: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String(1000))
    duration_ms: Mapped[float] = mapped_column(Float)


class DeliveryAlert(Base):
    """An alert owed for one failed attempt on one channel (email | webhook): written with
    the winning settlement, sent by the dispatcher, so each trigger event alerts once;
    given up after `deliveries.alert_tries` tries that could not send it."""

    __tablename__ = "delivery_alerts"
    __table_args__ = (
        UniqueConstraint("delivery_id", "attempt", "channel", name="uq_delivery_alerts"),
        Index(
            "ix_delivery_alerts_due",
            "due_at",
            postgresql_where=text("sent_at IS NULL AND given_up_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    delivery_id: Mapped[str] = mapped_column(String(26))
    attempt: Mapped[int] = mapped_column(Integer)
    channel: Mapped[str] = mapped_column(String(8))
    definition: Mapped[str] = mapped_column(String(100))
    tenant: Mapped[str] = mapped_column(String(64))
    failures: Mapped[int] = mapped_column(Integer)
    final: Mapped[bool] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(String(1000))
    claims: Mapped[int] = mapped_column(Integer, default=0)
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    given_up_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class InboxNotification(Base):
    """Durable inbox mode: a notification's content, committed before the 202."""

    __tablename__ = "inbox_notifications"

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    content: Mapped[bytes] = mapped_column(LargeBinary)
    pull: Mapped[bool] = mapped_column()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class InboxRecipient(Base):
    """Durable inbox mode: who got a copy."""

    __tablename__ = "inbox_recipients"

    notification_id: Mapped[str] = mapped_column(String(26), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)


class InboxChange(Base):
    """Durable inbox mode: a user's state change (mark, remove, mark_all, recall), in order."""

    __tablename__ = "inbox_changes"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[str] = mapped_column(String(200))
    op: Mapped[Any] = mapped_column(JSONB)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class AuditEntry(Base):
    """One admin action: who (the API key), on which tenant, what (method, route, target),
    how it ended (status) and when. Written in the action's own transaction when it ends
    well; see services/audit.py."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_tenant_id", "tenant", "id"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    tenant: Mapped[str] = mapped_column(String(64))
    """The tenant acted on; `*` for an action of no one tenant (an unbound key's)."""
    key_name: Mapped[str] = mapped_column(String(100))
    key_tenant: Mapped[str | None] = mapped_column(String(64))
    method: Mapped[str] = mapped_column(String(8))
    route: Mapped[str] = mapped_column(String(300))
    target: Mapped[str | None] = mapped_column(String(500))
    status: Mapped[int] = mapped_column(SmallInteger)


class InboxView(Base):
    """A named filter over the inbox (a tab): the tenant's (`owner` '') for every user of
    the tenant, or one user's own."""

    __tablename__ = "inbox_views"
    __table_args__ = (UniqueConstraint("tenant", "owner", "name"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str] = mapped_column(String(200))
    """'' for a tenant view; else the user whose view it is."""
    name: Mapped[str] = mapped_column(String(32))
    label: Mapped[str | None] = mapped_column(String(64))
    filter: Mapped[Any] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class InboxViewVersion(Base):
    """Bumped by every change of a (tenant, owner)'s views in the same transaction: users'
    Redis copies of their views say which version they follow (lua/views.lua)."""

    __tablename__ = "inbox_view_versions"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)


class QuietHours(Base):
    """A user's own quiet hours (migration 0018): a weekly schedule (services/quiet.py)
    in their profile's time zone; `{}` is none, whatever the tenant's default."""

    __tablename__ = "quiet_hours"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    schedule: Mapped[Any] = mapped_column(JSONB)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class QuietDefault(Base):
    """A tenant's default quiet hours, for users with none of their own, in the user's
    time zone (or `time_zone` here for users without one; else UTC)."""

    __tablename__ = "quiet_defaults"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    schedule: Mapped[Any] = mapped_column(JSONB)
    time_zone: Mapped[str | None] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Digest(Base):
    """One user's open digest under a key (services/digests.py): notifications' items
    accumulate until `due_at`, when the digest worker sends it as one delivery per channel
    and closes it (`state`: open, full, sent, empty, cancelled)."""

    __tablename__ = "digests"
    __table_args__ = (
        Index(
            "ux_digests_open",
            "tenant",
            "user_id",
            "key",
            unique=True,
            postgresql_where=text("state = 'open'"),
        ),
        Index("ix_digests_due", "due_at", postgresql_where=text("state IN ('open', 'full')")),
        Index("ix_digests_user", "tenant", "user_id"),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[str] = mapped_column(String(200))
    key: Mapped[str] = mapped_column(String(200))
    spec: Mapped[Any] = mapped_column(JSONB)
    """The digest spec of the notification that opened it."""
    state: Mapped[str] = mapped_column(String(16))
    item_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    first_sent: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    """`first: now`: the notification that opened it was sent at once (not an item)."""
    opened_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    closed_by: Mapped[str | None] = mapped_column(String(200))
    """Who cancelled it (an admin key's name), if cancelled."""


class DigestItem(Base):
    """One notification in a digest: what the digest's e-mail and push show of it, and
    the channels its user took it on."""

    __tablename__ = "digest_items"

    digest_id: Mapped[str] = mapped_column(
        String(26), ForeignKey("digests.id", ondelete="CASCADE"), primary_key=True
    )
    notification_id: Mapped[str] = mapped_column(String(26), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)
    channels: Mapped[list[str]] = mapped_column(JSONB)
    item: Mapped[Any] = mapped_column(JSONB)


class Escalation(Base):
    """One escalation step of one user's copy (migration 0017): at `due_at` the worker
    (workers/escalation.py) sends it on `channel` unless the copy is `unless` (seen, read,
    archived) or gone by then; `status` pending, then sent, cancelled or skipped."""

    __tablename__ = "escalations"
    __table_args__ = (
        Index("ix_escalations_due", "due_at", postgresql_where=text("status = 'pending'")),
        Index("ix_escalations_user", "tenant", "user_id"),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[str] = mapped_column(String(200))
    notification_id: Mapped[str] = mapped_column(String(26))
    step: Mapped[int] = mapped_column(SmallInteger)
    """The step's place in the notification's `escalate`, from 1."""
    unless: Mapped[str] = mapped_column(String(16))
    channel: Mapped[str] = mapped_column(String(16))
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    notification: Mapped[Any] = mapped_column(JSONB)
    """The notification as its copies show it (JSON), for the e-mail or push."""
    push_ttl_named: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=text("false")
    )
    status: Mapped[str] = mapped_column(String(16), default="pending", server_default="pending")
    outcome: Mapped[str | None] = mapped_column(String(200))
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class EscalationDefault(Base):
    """A tenant's escalation steps for notifications of one category that name none."""

    __tablename__ = "escalation_defaults"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    category: Mapped[str] = mapped_column(String(64), primary_key=True)
    steps: Mapped[Any] = mapped_column(JSONB)


class ProducerClaim(Base):
    """A row a periodic producer notified, for its dedupe window (migration 0021), kept
    here in durable inbox mode so a Redis that lost its data does not make every producer
    send its rows again (workers/producers.py; in Redis otherwise)."""

    __tablename__ = "producer_claims"

    producer: Mapped[str] = mapped_column(String(100), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
