"""The deliveries of a batch of escalation steps that send: the channels' decisions
(the preference matrix, `critical` bypassing opt-outs) made here for the whole batch, a
few queries per tenant and category; the deliveries added by services/channel_rows.py as
a channel send's are (addresses, browsers' subscriptions, the tenant's `email` and `push`
definitions, quiet hours holding all but `critical`). Each delivery's id derives from
(notification, step, user, channel, subscription), so a batch run again after a crash adds
nothing twice."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import ChannelSend, Escalation
from notifyhub.db.repositories import preferences as preferences_repo
from notifyhub.db.unit import UnitOfWork
from notifyhub.services.channel_rows import ChannelRows, is_critical, push_fields
from notifyhub.services.channels import Matrix, NotificationMessage


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


def message_of(row: Escalation, wants: bool) -> NotificationMessage:
    """The step's notification to its user on its channel (`wants`: the preferences')."""
    pushed = push_fields(row.notification, bool(row.push_ttl_named))
    return NotificationMessage(send_of(row), row.user_id, {row.channel: wants}, pushed)


class StepSender:
    """Adds the deliveries of steps that send, one tenant at a time."""

    def __init__(self, rows: ChannelRows) -> None:
        self._rows = rows
        """Adds the deliveries (held in quiet hours, sent at once or later)."""

    async def send(self, unit: UnitOfWork, rows: Sequence[Escalation]) -> dict[str, str]:
        """Each row's outcome (`e-mailed`, `pushed to 2 browsers`, `skipped: ...`, held
        for quiet hours until ...), by row id; rows of any tenants and channels."""
        by_tenant: dict[str, list[Escalation]] = {}
        for row in rows:
            by_tenant.setdefault(row.tenant, []).append(row)
        outcomes: dict[str, str] = {}
        for tenant, group in by_tenant.items():
            wants = await _wants(unit.session, tenant, group)
            messages = [message_of(row, wants[row.id]) for row in group]
            added = await self._rows.add(unit, tenant, messages)
            for row, outcome in zip(group, added.outcomes, strict=True):
                outcomes[row.id] = outcome[row.channel]
        return outcomes


async def _wants(session: AsyncSession, tenant: str, rows: list[Escalation]) -> dict[str, bool]:
    """Whether each row's user takes its notification on its channel: the preference
    matrix per category (the tenant's default for users without a row), `critical` yes."""
    by_category: dict[str, list[Escalation]] = {}
    wants: dict[str, bool] = {}
    for row in rows:
        category = row.notification.get("category")
        if not category or is_critical(row.notification):
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
