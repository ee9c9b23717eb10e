"""Channel rows: the one path from "send this user a message on e-mail or Web Push" to
outbox deliveries. The channel worker's notifications (services/channels.py), the digest
worker's digests (services/digests.py) and the escalation worker's steps
(services/escalation_sends.py) each describe their messages (`Message`: the user, the
channels asked and whether the user's preferences take them, how a row looks) and hand
them to `ChannelRows.add`, which for a batch of one tenant's messages:

- reads the users' addresses and browsers' push subscriptions (one statement each);
- makes the tenant's `email` and `push` definitions on first use and checks that they
  send (of their kind, enabled);
- holds a user's deliveries until their quiet hours end (services/quiet_hours.py: due
  then, not now), unless the message is `critical`;
- adds every delivery once (`enqueue_many_once`): the caller derives each id from what
  it sends, so a batch run again after a crash adds nothing twice;

and answers each message's outcome per channel (`e-mailed`, `pushed to 2 browsers`,
`skipped: ...`, with `held for quiet hours until ...` when held).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import DeliveryDefinition
from notifyhub.db.repositories import deliveries as deliveries_repo
from notifyhub.db.repositories import profiles, push_subscriptions
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.delivery import AlertTrigger
from notifyhub.domain.notification import Channel, Severity, to_rfc3339
from notifyhub.services import signing
from notifyhub.services.deliveries import Kicker, enqueue_many_once
from notifyhub.services.quiet_hours import QuietHours
from notifyhub.services.webpush_target import MAX_PLAINTEXT

EMAIL, PUSH = Channel.EMAIL.value, Channel.PUSH.value
"""The channels' names (plain strings: they key JSON)."""

EMAIL_DEFINITION = "email"
"""The tenant's definition e-mails go through (kind `email`; made on first use)."""
PUSH_DEFINITION = "push"
"""The tenant's definition Web Pushes go through (kind `webpush`; made on first use)."""
DEFINITIONS = {EMAIL: (EMAIL_DEFINITION, "email"), PUSH: (PUSH_DEFINITION, "webpush")}
"""Per channel: the tenant's definition's name and the kind it must be of to send."""

DEFAULT_EMAIL: dict[str, Any] = {
    "subject": "{{ notification.title }}",
    "text": "{{ notification.body }}"
    "{% if notification.action_url %}\n\n{{ notification.action_url }}{% endif %}\n",
}
"""The templates of an `email` definition made on first use (over the delivery payload:
`notification`, `user`, `to`)."""

PUSH_TTL_DEFAULT_S = 86_400
"""A push's `TTL` when the notification named no expiry of its own: a day."""
PUSH_TTL_MAX_S = 28 * 86_400
"""The longest `TTL` push services keep a message (28 days)."""
PUSHED_FIELDS = ("id", "tenant", "title", "severity", "category", "action_url", "thread_key")
"""The notification's fields a push carries (and a shortened `body`)."""
PUSH_BODY_CHARS = 300
TOPIC_CHARS = 32
"""Web Push `Topic`: at most 32 base64url characters."""

URGENCY = {
    Severity.CRITICAL: "high",
    Severity.ERROR: "high",
    Severity.WARNING: "normal",
    Severity.INFO: "low",
    Severity.SUCCESS: "low",
}
"""Web Push `Urgency` by severity."""

E_MAILED = "e-mailed"
SKIPPED_PREFERENCE = "skipped: preference"
SKIPPED_NO_ADDRESS = "skipped: no address"
SKIPPED_NO_SUBSCRIPTION = "skipped: no subscription"
SKIPPED_NO_DEFINITION = "skipped: no e-mail definition"
SKIPPED_NO_PUSH_DEFINITION = "skipped: no push definition"

Row = tuple[str, dict[str, Any], str | None]
"""A delivery to add: its id, payload and description."""


class Message(Protocol):
    """What a caller sends one user: the channels asked, how each delivery looks."""

    @property
    def user(self) -> str: ...

    @property
    def channels(self) -> Mapping[str, bool]:
        """The channels asked (`email`, `push`), each: whether the user takes it (the
        preference matrix; always for `critical`)."""
        ...

    @property
    def critical(self) -> bool:
        """Severity `critical`: never held for quiet hours."""
        ...

    def email(self, to: str) -> Row:
        """The e-mail's delivery, to the user's address `to`."""
        ...

    def push(self, subscription_id: str) -> Row:
        """The push's delivery to one of the user's browsers."""
        ...


@dataclass(frozen=True, slots=True)
class Added:
    """A batch's outcome: per message (in order), channel -> outcome; deliveries added."""

    outcomes: list[dict[str, str]]
    added: int


def held_for_quiet(outcome: str, until: datetime | None) -> str:
    """The outcome, noting a delivery held for quiet hours until `until` (if any)."""
    if until is None:
        return outcome
    return f"{outcome}, held for quiet hours until {to_rfc3339(until)}"


def pushed_to(browsers: int) -> str:
    return f"pushed to {browsers} browser{'' if browsers == 1 else 's'}"


def is_critical(notification: Mapping[str, Any]) -> bool:
    return notification.get("severity") == Severity.CRITICAL


class ChannelRows:
    """Adds messages' e-mail and push deliveries to the outbox (see the module)."""

    def __init__(self, sender: Kicker | None = None, quiet: QuietHours | None = None) -> None:
        self._sender = sender
        """Sends the deliveries at once after the batch commits (else the dispatcher)."""
        self._quiet = quiet
        """Holds users' deliveries in their quiet hours (None: nobody's are held)."""

    async def add(self, unit: UnitOfWork, tenant: str, messages: Sequence[Message]) -> Added:
        """The deliveries of `messages` (all of `tenant`), in `unit`; each one's outcome
        on each channel it asked."""
        held = await self._held(unit.session, tenant, messages)
        outcomes: list[dict[str, str]] = [{} for _ in messages]
        added = await self._emails(unit, tenant, messages, held, outcomes)
        added += await self._pushes(unit, tenant, messages, held, outcomes)
        return Added(outcomes, added)

    async def _held(
        self, session: AsyncSession, tenant: str, messages: Sequence[Message]
    ) -> dict[str, datetime]:
        """Users with a message to hold who are in quiet hours now: when they end."""
        users = {m.user for m in messages if not m.critical and any(m.channels.values())}
        if self._quiet is None or not users:
            return {}
        return await self._quiet.held_until(session, tenant, sorted(users))

    async def _emails(
        self,
        unit: UnitOfWork,
        tenant: str,
        messages: Sequence[Message],
        held: dict[str, datetime],
        outcomes: list[dict[str, str]],
    ) -> int:
        """One e-mail per message that asks for it, if its user has an address."""
        wanted = {m.user for m in messages if m.channels.get(EMAIL)}
        found = await profiles.emails_of(unit.session, tenant, sorted(wanted)) if wanted else {}
        usable = bool(found) and await _usable(unit.session, tenant, EMAIL)
        rows: list[Row] = []
        due: dict[str, datetime] = {}
        for message, outcome in zip(messages, outcomes, strict=True):
            if EMAIL not in message.channels:
                continue
            if not message.channels[EMAIL]:
                outcome[EMAIL] = SKIPPED_PREFERENCE
            elif message.user not in found:
                outcome[EMAIL] = SKIPPED_NO_ADDRESS
            elif not usable:
                outcome[EMAIL] = SKIPPED_NO_DEFINITION
            else:
                until = _until(message, held)
                rows.append(message.email(found[message.user]))
                due |= {rows[-1][0]: until} if until else {}
                outcome[EMAIL] = held_for_quiet(E_MAILED, until)
        return await self._enqueue(unit, tenant, EMAIL_DEFINITION, rows, due)

    async def _pushes(
        self,
        unit: UnitOfWork,
        tenant: str,
        messages: Sequence[Message],
        held: dict[str, datetime],
        outcomes: list[dict[str, str]],
    ) -> int:
        """One push per subscription of the user of each message that asks for it."""
        session = unit.session
        wanted = {m.user for m in messages if m.channels.get(PUSH)}
        found = await push_subscriptions.of_users(session, tenant, sorted(wanted)) if wanted else {}
        usable = any(found.values()) and await _usable(session, tenant, PUSH)
        rows: list[Row] = []
        due: dict[str, datetime] = {}
        for message, outcome in zip(messages, outcomes, strict=True):
            if PUSH not in message.channels:
                continue
            subscriptions = found.get(message.user) or []
            if not message.channels[PUSH]:
                outcome[PUSH] = SKIPPED_PREFERENCE
            elif not subscriptions:
                outcome[PUSH] = SKIPPED_NO_SUBSCRIPTION
            elif not usable:
                outcome[PUSH] = SKIPPED_NO_PUSH_DEFINITION
            else:
                until = _until(message, held)
                pushes = [message.push(subscription.id) for subscription in subscriptions]
                rows.extend(pushes)
                due |= {key: until for key, _, _ in pushes} if until else {}
                outcome[PUSH] = held_for_quiet(pushed_to(len(subscriptions)), until)
        return await self._enqueue(unit, tenant, PUSH_DEFINITION, rows, due)

    async def _enqueue(
        self,
        unit: UnitOfWork,
        tenant: str,
        definition: str,
        rows: list[Row],
        due: dict[str, datetime],
    ) -> int:
        """The rows' deliveries on `definition`, each once (one already there, from a
        batch repeated, is not added again), a held one's due when quiet hours end."""
        if not rows:
            return 0
        return await enqueue_many_once(
            unit, definition, rows, tenant=tenant, sender=self._sender, due=due
        )


def _until(message: Message, held: dict[str, datetime]) -> datetime | None:
    """When the message's deliveries are due: None (now) unless its user is held."""
    return None if message.critical else held.get(message.user)


async def _usable(session: AsyncSession, tenant: str, channel: str) -> bool:
    """Whether the tenant's definition for `channel` sends it (made on first use): of
    its kind, enabled."""
    definition = await ensure_definition(session, tenant, channel)
    _name, kind = DEFINITIONS[channel]
    return definition is not None and definition.kind == kind and definition.disabled_at is None


async def ensure_definition(
    session: AsyncSession, tenant: str, channel: str
) -> DeliveryDefinition | None:
    """The tenant's definition for `channel` (`email` or `push`), made with defaults on
    first use (one the tenant defined is kept as it is, whatever its kind: a caller
    checks it)."""
    name, kind = DEFINITIONS[channel]
    values: dict[str, Any] = {
        "tenant": tenant,
        "name": name,
        "kind": kind,
        "url": "",
        "email": DEFAULT_EMAIL if kind == "email" else None,
        "timeout_s": 10.0,
        "retry_intervals": "5s,5m,1h,1d",
        "max_retries": 5,
        "alert_trigger": AlertTrigger.FINAL_FAILURE.value,
        "alert_after_n": None,
        "alert_emails": [],
        "alert_webhook_url": None,
        "need_confirm": False,
        "max_confirm_delay_s": 300,
        "secret": signing.new_secret(),
    }
    await deliveries_repo.add_definition_once(session, values)
    return await deliveries_repo.definition(session, tenant, name)


def push_fields(notification: Mapping[str, Any], named_expiry: bool) -> dict[str, Any]:
    """What every push of `notification` carries (`webpush_payload`'s arguments but the
    subscription): the notification as a push shows it, its TTL (until it expires if it
    named an expiry, else a day), urgency and topic."""
    severity = Severity(notification.get("severity", Severity.INFO))
    ttl_s = PUSH_TTL_DEFAULT_S
    if named_expiry:
        ttl_s = push_ttl_s(datetime.fromisoformat(notification["expires_at"]), datetime.now(UTC))
    return {
        "notification": pushed_notification(notification),
        "ttl_s": ttl_s,
        "urgency": URGENCY[severity],
        "topic": push_topic(notification),
    }


def push_ttl_s(expires_at: datetime, now: datetime) -> int:
    """A push's `TTL` until `expires_at`: at most 28 days, never negative."""
    left = int((expires_at - now).total_seconds())
    return max(0, min(left, PUSH_TTL_MAX_S))


def push_topic(notification: Mapping[str, Any]) -> str | None:
    """The push's `Topic` (a newer push with it replaces one still pending): the thread
    or collapse key, hashed to 32 base64url characters; None when it has neither."""
    key = notification.get("thread_key") or notification.get("collapse_key")
    if not key:
        return None
    digest = hashlib.sha256(str(key).encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")[:TOPIC_CHARS]


def pushed_notification(notification: Mapping[str, Any]) -> dict[str, Any]:
    """What a push carries of the notification: what a browser shows (its id, title, a
    body of at most PUSH_BODY_CHARS, severity, category, link, thread), not its `data`:
    one encrypted record holds about 4 KB (webpush_target.MAX_PLAINTEXT)."""
    shown = {k: notification.get(k) for k in PUSHED_FIELDS if notification.get(k) is not None}
    body = str(notification.get("body") or "")
    if body:
        shown["body"] = body[:PUSH_BODY_CHARS]
    if len(orjson.dumps(shown)) > MAX_PLAINTEXT:  # a long link: without it, the rest fits
        shown.pop("action_url", None)
    return shown
