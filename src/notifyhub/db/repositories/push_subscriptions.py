"""Browsers' Web Push subscriptions: per user of a tenant, at most `MAX_PER_USER`; an
endpoint is one subscription per tenant (the browser that re-subscribes updates it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Boolean, delete, func, literal_column, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import PushSubscription

MAX_PER_USER = 10
"""Subscriptions one user may hold (browsers and devices); one more is a 409."""


@dataclass(frozen=True, slots=True)
class NewSubscription:
    """What a browser's `PushSubscription.toJSON()` says, checked, and who asked."""

    endpoint: str
    p256dh: str
    """base64url, unpadded: the browser's uncompressed P-256 public key (65 bytes)."""
    auth: str
    """base64url, unpadded: the browser's auth secret (16 bytes)."""
    expiration_time: datetime | None = None
    user_agent: str | None = None


@dataclass(frozen=True, slots=True)
class PushSubscriptionRow:
    """One stored subscription."""

    id: str
    tenant: str
    user: str
    endpoint: str
    p256dh: str
    auth: str
    expiration_time: datetime | None
    user_agent: str | None
    created_at: datetime

    @classmethod
    def of(cls, row: PushSubscription) -> PushSubscriptionRow:
        return cls(
            row.id,
            row.tenant,
            row.user_id,
            row.endpoint,
            row.p256dh,
            row.auth,
            row.expiration_time,
            row.user_agent,
            row.created_at,
        )


async def _take_turn(session: AsyncSession, tenant: str, user: str) -> None:
    """Concurrent adds of one user's subscriptions take turns (transaction-scoped), so
    two of them cannot both pass the limit."""
    key = func.hashtextextended(f"push-subscriptions:{tenant}:{user}", 0)
    await session.execute(select(func.pg_advisory_xact_lock(key)))


async def add(
    session: AsyncSession,
    tenant: str,
    user: str,
    new: NewSubscription,
    *,
    new_id: str,
    limit: int = MAX_PER_USER,
) -> tuple[PushSubscriptionRow, bool] | None:
    """Store the subscription and say whether it is new. The same endpoint again updates
    it (keys, expiry, agent; its id stays), and moves it to `user` if another user of the
    tenant held it: one browser, whoever subscribed last. None, with nothing written, when
    the user already holds `limit` others."""
    await _take_turn(session, tenant, user)
    held = await session.scalar(
        select(func.count()).where(
            PushSubscription.tenant == tenant,
            PushSubscription.user_id == user,
            PushSubscription.endpoint != new.endpoint,
        )
    )
    if (held or 0) >= limit:
        return None
    values = {
        "user_id": user,
        "p256dh": new.p256dh,
        "auth": new.auth,
        "expiration_time": new.expiration_time,
        "user_agent": new.user_agent,
    }
    statement = insert(PushSubscription).values(
        id=new_id, tenant=tenant, endpoint=new.endpoint, **values
    )
    upsert = statement.on_conflict_do_update(
        index_elements=[PushSubscription.tenant, PushSubscription.endpoint], set_=values
    ).returning(PushSubscription, literal_column("xmax = 0", Boolean).label("inserted"))
    row, inserted = (await session.execute(upsert)).one()
    return PushSubscriptionRow.of(row), bool(inserted)


async def of_user(session: AsyncSession, tenant: str, user: str) -> list[PushSubscriptionRow]:
    """The user's subscriptions, oldest first."""
    return (await of_users(session, tenant, [user])).get(user, [])


async def of_users(
    session: AsyncSession, tenant: str, users: Sequence[str]
) -> dict[str, list[PushSubscriptionRow]]:
    """The subscriptions of those of `users` who hold any, each user's oldest first."""
    if not users:
        return {}
    rows = await session.scalars(
        select(PushSubscription)
        .where(PushSubscription.tenant == tenant, PushSubscription.user_id.in_(list(users)))
        .order_by(PushSubscription.user_id, PushSubscription.created_at, PushSubscription.id)
    )
    found: dict[str, list[PushSubscriptionRow]] = {}
    for row in rows:
        found.setdefault(row.user_id, []).append(PushSubscriptionRow.of(row))
    return found


async def get(
    session: AsyncSession, tenant: str, subscription_id: str
) -> PushSubscriptionRow | None:
    """One subscription of the tenant by id (None: none, or another tenant's)."""
    row = await session.scalar(
        select(PushSubscription).where(
            PushSubscription.tenant == tenant, PushSubscription.id == subscription_id
        )
    )
    return None if row is None else PushSubscriptionRow.of(row)


async def remove(session: AsyncSession, tenant: str, user: str, subscription_id: str) -> bool:
    """Remove the user's subscription `subscription_id`; False when they hold none by it
    (another user's or tenant's id is none of theirs)."""
    result = await session.execute(
        delete(PushSubscription)
        .where(
            PushSubscription.tenant == tenant,
            PushSubscription.user_id == user,
            PushSubscription.id == subscription_id,
        )
        .returning(PushSubscription.id)
    )
    return result.first() is not None


async def remove_endpoint(
    session: AsyncSession, tenant: str, endpoint: str, user: str | None = None
) -> bool:
    """Remove the tenant's subscription at `endpoint` (only `user`'s, when given): a push
    service answered 404/410 (the browser unsubscribed), or the user removes it by its
    endpoint. False when there was none."""
    condition = [PushSubscription.tenant == tenant, PushSubscription.endpoint == endpoint]
    if user is not None:
        condition.append(PushSubscription.user_id == user)
    result = await session.execute(
        delete(PushSubscription).where(*condition).returning(PushSubscription.id)
    )
    return result.first() is not None
