"""Digests: a user's open digest under a key and its items (services/digests.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import Digest, DigestItem, UserProfile

OPEN, FULL, SENT, EMPTY, CANCELLED = "open", "full", "sent", "empty", "cancelled"
PENDING = (OPEN, FULL)
"""The states of a digest not sent yet."""


@dataclass(frozen=True, slots=True)
class Opened:
    """The user's open digest under a key, as `open_or_join` found or made it."""

    id: str
    item_count: int
    opened_at: datetime
    created: bool


async def open_or_join(
    session: AsyncSession,
    *,
    digest_id: str,
    tenant: str,
    user: str,
    key: str,
    spec: dict[str, Any],
    now: datetime,
    due_at: datetime,
    first_sent: bool,
) -> Opened:
    """The user's open digest under `key`, made (with `digest_id`, due at `due_at`) when
    there is none; one statement, so two workers adding to the same user's digest at
    once meet in the unique index and share it (the row stays locked until the caller's
    transaction ends). One whose window closed (due, not sent yet) takes no more: it
    turns `full`, and a new one opens."""
    await session.execute(
        update(Digest)
        .where(
            Digest.tenant == tenant,
            Digest.user_id == user,
            Digest.key == key,
            Digest.state == OPEN,
            Digest.due_at <= now,
        )
        .values(state=FULL)
    )
    statement = (
        insert(Digest)
        .values(
            id=digest_id,
            tenant=tenant,
            user_id=user,
            key=key,
            spec=spec,
            state=OPEN,
            item_count=0,
            first_sent=first_sent,
            opened_at=now,
            last_at=now,
            due_at=due_at,
        )
        .on_conflict_do_update(
            index_elements=[Digest.tenant, Digest.user_id, Digest.key],
            index_where=text("state = 'open'"),
            set_={"last_at": func.greatest(Digest.last_at, now)},
        )
        .returning(Digest.id, Digest.item_count, Digest.opened_at, Digest.id == digest_id)
    )
    found, count, opened_at, created = (await session.execute(statement)).one()
    return Opened(found, count, opened_at, bool(created))


async def add_item(
    session: AsyncSession,
    digest_id: str,
    notification_id: str,
    seq: int,
    channels: Sequence[str],
    item: dict[str, Any],
) -> bool:
    """The notification's item in the digest, once (False: it was there already)."""
    statement = (
        insert(DigestItem)
        .values(
            digest_id=digest_id,
            notification_id=notification_id,
            seq=seq,
            channels=list(channels),
            item=item,
        )
        .on_conflict_do_nothing()
        .returning(DigestItem.seq)
    )
    return (await session.execute(statement)).first() is not None


async def counted(
    session: AsyncSession, digest_id: str, count: int, due_at: datetime | None, *, full: bool
) -> None:
    """The digest holds `count` items and closes at `due_at` (None: when it was to; now,
    and `full`, when it reached its `max_items`: no later notification joins it)."""
    values: dict[str, Any] = {"item_count": count}
    if due_at is not None:
        values["due_at"] = due_at
    if full:
        values["state"] = FULL
    await session.execute(update(Digest).where(Digest.id == digest_id).values(**values))


async def claim_due(session: AsyncSession, now: datetime, limit: int) -> list[Digest]:
    """Up to `limit` digests due by `now` that no other worker holds (locked until the
    caller's transaction ends), the most overdue first."""
    found = await session.scalars(
        select(Digest)
        .where(Digest.state.in_(PENDING), Digest.due_at <= now)
        .order_by(Digest.due_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list(found)


async def items_of(session: AsyncSession, digest_ids: Sequence[str]) -> dict[str, list[DigestItem]]:
    """The digests' items, the latest first."""
    rows = await session.scalars(
        select(DigestItem)
        .where(DigestItem.digest_id.in_(digest_ids))
        .order_by(DigestItem.digest_id, DigestItem.seq.desc())
    )
    found: dict[str, list[DigestItem]] = {digest_id: [] for digest_id in digest_ids}
    for row in rows:
        found[row.digest_id].append(row)
    return found


async def close(
    session: AsyncSession, digest_ids: Sequence[str], state: str, now: datetime
) -> None:
    """The digests are closed (`sent`, `empty`) at `now`."""
    if digest_ids:
        await session.execute(
            update(Digest).where(Digest.id.in_(digest_ids)).values(state=state, closed_at=now)
        )


async def pending_of(session: AsyncSession, tenant: str, user: str) -> list[Digest]:
    """`tenant`'s user's digests not sent yet, the soonest due first."""
    found = await session.scalars(
        select(Digest)
        .where(Digest.tenant == tenant, Digest.user_id == user, Digest.state.in_(PENDING))
        .order_by(Digest.due_at)
    )
    return list(found)


async def cancel(
    session: AsyncSession, tenant: str, user: str, digest_id: str, by: str, now: datetime
) -> Digest | None:
    """`tenant`'s user's pending digest, cancelled (its items are never sent); None when
    there is no such pending digest (sent, cancelled, another tenant's or user's)."""
    return await session.scalar(
        update(Digest)
        .where(
            Digest.id == digest_id,
            Digest.tenant == tenant,
            Digest.user_id == user,
            Digest.state.in_(PENDING),
        )
        .values(state=CANCELLED, closed_at=now, closed_by=by[:200])
        .returning(Digest)
    )


async def zones_of(session: AsyncSession, tenant: str, users: Sequence[str]) -> dict[str, str]:
    """The users' time zones (profiles' `time_zone`), for those who set one."""
    rows = await session.execute(
        select(UserProfile.user_id, UserProfile.time_zone).where(
            UserProfile.tenant == tenant,
            UserProfile.user_id.in_(list(users)),
            UserProfile.time_zone.is_not(None),
        )
    )
    return {user: str(zone) for user, zone in rows}
