"""The deliveries of a batch of escalation steps that send: the channels' decisions
(services/channels.py: preference matrix, addresses, browsers' subscriptions, `critical`
bypassing opt-outs, the tenant's `email` and `push` definitions), made for the whole
batch at once, a few queries per tenant and channel instead of per step. Each delivery's
id derives from (notification, step, user, channel, subscription), so a batch run again
after a crash adds nothing twice."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import ChannelSend, DeliveryDefinition, Escalation
from notifyhub.db.repositories import preferences as preferences_repo
from notifyhub.db.repositories import profiles, push_subscriptions
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.notification import Channel, Severity
from notifyhub.services.channels import (
    E_MAILED,
    EMAIL_DEFINITION,
    PUSH_DEFINITION,
    SKIPPED_NO_ADDRESS,
    SKIPPED_NO_DEFINITION,
    SKIPPED_NO_PUSH_DEFINITION,
    SKIPPED_NO_SUBSCRIPTION,
    SKIPPED_PREFERENCE,
    URGENCY,
    Matrix,
    Row,
    delivery_id,
    ensure_definition,
    push_topic,
    push_ttl_s,
    pushed_notification,
    pushed_to,
)
from notifyhub.services.deliveries import Kicker, enqueue_many_once
from notifyhub.services.webpush_target import webpush_payload

KINDS = {Channel.EMAIL.value: "email", Channel.PUSH.value: "webpush"}


def send_of(row: Escalation) -> ChannelSend:
    """The step as a channel send of its own (not stored): its id names the step, which
    the deliveries' ids hash."""
    return ChannelSend(
        id=f"{row.notification_id}:escalate:{row.step}",
        tenant=row.tenant,
        notification=row.notification,
        channels=[row.channel],
        users=[row.user_id],
        push_ttl_named=row.push_ttl_named,
        expanded=0,
    )


class StepSender:
    """Adds the deliveries of steps that send, one tenant and channel at a time."""

    def __init__(self, sender: Kicker | None = None) -> None:
        self._sender = sender
        """Sends the deliveries at once after the batch commits (else the dispatcher)."""

    async def send(self, unit: UnitOfWork, rows: Sequence[Escalation]) -> dict[str, str]:
        """Each row's outcome (`e-mailed`, `pushed to 2 browsers`, `skipped: ...`), by
        row id; rows of any tenants and channels."""
        groups: dict[tuple[str, str], list[Escalation]] = {}
        for row in rows:
            groups.setdefault((row.tenant, row.channel), []).append(row)
        outcomes: dict[str, str] = {}
        for (tenant, channel), group in groups.items():
            wants = await _wants(unit.session, tenant, group)
            if channel == Channel.EMAIL:
                outcomes |= await self._emails(unit, tenant, group, wants)
            else:
                outcomes |= await self._pushes(unit, tenant, group, wants)
        return outcomes

    async def _emails(
        self, unit: UnitOfWork, tenant: str, rows: list[Escalation], wants: dict[str, bool]
    ) -> dict[str, str]:
        session = unit.session
        wanted = [r.user_id for r in rows if wants[r.id]]
        addresses = await profiles.emails_of(session, tenant, wanted) if wanted else {}
        usable = bool(addresses) and _usable(
            await ensure_definition(session, tenant, Channel.EMAIL), Channel.EMAIL
        )
        outcomes: dict[str, str] = {}
        added: list[Row] = []
        for row in rows:
            if not wants[row.id]:
                outcomes[row.id] = SKIPPED_PREFERENCE
            elif row.user_id not in addresses:
                outcomes[row.id] = SKIPPED_NO_ADDRESS
            elif not usable:
                outcomes[row.id] = SKIPPED_NO_DEFINITION
            else:
                outcomes[row.id] = E_MAILED
                to = addresses[row.user_id]
                payload = {"to": to, "user": row.user_id, "notification": row.notification}
                subject = str(row.notification.get("title", ""))[:200]
                description = f"e-mail to {row.user_id}: {subject}"[:1000]
                key = delivery_id(send_of(row), row.user_id, Channel.EMAIL.value)
                added.append((key, payload, description))
        await enqueue_many_once(unit, EMAIL_DEFINITION, added, tenant=tenant, sender=self._sender)
        return outcomes

    async def _pushes(
        self, unit: UnitOfWork, tenant: str, rows: list[Escalation], wants: dict[str, bool]
    ) -> dict[str, str]:
        session = unit.session
        wanted = [r.user_id for r in rows if wants[r.id]]
        found = await push_subscriptions.of_users(session, tenant, wanted) if wanted else {}
        usable = any(found.values()) and _usable(
            await ensure_definition(session, tenant, Channel.PUSH), Channel.PUSH
        )
        outcomes: dict[str, str] = {}
        added: list[Row] = []
        for row in rows:
            subscriptions = found.get(row.user_id) or []
            if not wants[row.id]:
                outcomes[row.id] = SKIPPED_PREFERENCE
            elif not subscriptions:
                outcomes[row.id] = SKIPPED_NO_SUBSCRIPTION
            elif not usable:
                outcomes[row.id] = SKIPPED_NO_PUSH_DEFINITION
            else:
                outcomes[row.id] = pushed_to(len(subscriptions))
                common = _push_fields(row)
                for subscription in subscriptions:
                    payload = {**webpush_payload(subscription.id, **common), "user": row.user_id}
                    key = delivery_id(send_of(row), row.user_id, PUSH, subscription.id)
                    added.append((key, payload, f"push to {row.user_id}"[:1000]))
        await enqueue_many_once(unit, PUSH_DEFINITION, added, tenant=tenant, sender=self._sender)
        return outcomes


PUSH = Channel.PUSH.value


def _usable(definition: DeliveryDefinition | None, channel: str) -> bool:
    """Whether the tenant's definition sends this channel: of its kind, enabled."""
    kind = KINDS[channel]
    return definition is not None and definition.kind == kind and definition.disabled_at is None


async def _wants(session: AsyncSession, tenant: str, rows: list[Escalation]) -> dict[str, bool]:
    """Whether each row's user takes its notification on its channel: the preference
    matrix per category (the tenant's default for users without a row), `critical` yes."""
    by_category: dict[str, list[Escalation]] = {}
    wants: dict[str, bool] = {}
    for row in rows:
        category = row.notification.get("category")
        if not category or row.notification.get("severity") == Severity.CRITICAL:
            wants[row.id] = True
        else:
            by_category.setdefault(str(category), []).append(row)
    for category, group in by_category.items():
        users = [r.user_id for r in group]
        own = await preferences_repo.of_users(session, tenant, users, category)
        default = await preferences_repo.default_of(session, tenant, category)
        matrix = Matrix(own, default, critical=False)
        for row in group:
            wants[row.id] = matrix.wants(row.user_id, row.channel)
    return wants


def _push_fields(row: Escalation) -> dict[str, Any]:
    """What the step's pushes carry: the notification as a push shows it, its TTL,
    urgency and topic (`webpush_payload`'s arguments), as the channels' pushes do."""
    notification = row.notification
    expires_at = datetime.fromisoformat(notification["expires_at"])
    severity = Severity(notification.get("severity", Severity.INFO))
    return {
        "notification": pushed_notification(notification),
        "ttl_s": push_ttl_s(expires_at, datetime.now(UTC), bool(row.push_ttl_named)),
        "urgency": URGENCY[severity],
        "topic": push_topic(notification),
    }
