"""Channel sends: a notification's e-mail and Web Push sends, as one row per publish that
the channel worker expands into outbox deliveries, a chunk of users at a time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import ChannelSend
from notifyhub.domain.notification import Notification


async def add(
    session: AsyncSession,
    notification: Notification,
    channels: Sequence[str],
    users: Sequence[str],
    *,
    named_expiry: bool = False,
    digest: dict[str, object] | None = None,
) -> None:
    """The send of `notification` on `channels` to `users`, in the caller's transaction
    (flushed: a failure is the publish's, before its 202); `named_expiry`: the publish
    named its expiry (pushes live until it); `digest`: its digest spec (JSON), if any."""
    session.add(
        ChannelSend(
            id=notification.id,
            tenant=notification.tenant,
            notification=orjson.loads(notification.model_dump_json()),
            channels=list(channels),
            users=list(users),
            push_ttl_named=named_expiry,
            expanded=0,
            digest=digest,
        )
    )
    await session.flush()


async def claim_open(session: AsyncSession) -> ChannelSend | None:
    """The oldest send not fully expanded that no other worker holds now (its row is
    locked until the caller's transaction ends: one chunk's work)."""
    due = or_(ChannelSend.retry_at.is_(None), ChannelSend.retry_at <= func.clock_timestamp())
    found = await session.scalars(
        select(ChannelSend)
        .where(ChannelSend.done_at.is_(None), due)
        .order_by(ChannelSend.created_at)
        .limit(1)
        .with_for_update(skip_locked=True)
    )
    return found.first()


async def advance(session: AsyncSession, send_id: str, expanded: int, *, done: bool) -> None:
    """Note that the first `expanded` users are expanded (and the send done, if `done`)."""
    values: dict[str, object] = {"expanded": expanded, "failures": 0, "retry_at": None}
    if done:
        values["done_at"] = datetime.now(UTC)
    await session.execute(update(ChannelSend).where(ChannelSend.id == send_id).values(**values))


async def postpone(session: AsyncSession, send_id: str, error: str, max_wait_s: float) -> int:
    """A chunk of the send failed: it waits 2^failures seconds (at most `max_wait_s`)
    before it is claimed again, so one that keeps failing holds up no other send; how
    many chunks failed in a row."""
    wait = func.least(func.power(2, ChannelSend.failures), max_wait_s)
    failures = await session.scalar(
        update(ChannelSend)
        .where(ChannelSend.id == send_id)
        .values(
            failures=ChannelSend.failures + 1,
            retry_at=func.clock_timestamp() + func.make_interval(0, 0, 0, 0, 0, 0, wait),
            last_error=error[:1000],
        )
        .returning(ChannelSend.failures)
    )
    return int(failures or 0)


async def find(session: AsyncSession, tenant: str, send_id: str) -> ChannelSend | None:
    """`tenant`'s send of that notification, if any."""
    return await session.scalar(
        select(ChannelSend).where(ChannelSend.tenant == tenant, ChannelSend.id == send_id)
    )
