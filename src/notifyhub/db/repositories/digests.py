"""Digests: a user's open digest under a key and its items (services/digests.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Text, case, cast, func, select, text, update
from sqlalchemy.dialects.postgresql import aggregate_order_by, insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import Digest, DigestItem, UserProfile

OPEN, FULL, SENT, EMPTY, CANCELLED = "open", "full", "sent", "empty", "cancelled"
PENDING = (OPEN, FULL)
"""The states of a digest not sent yet."""


@dataclass(frozen=True, slots=True)
class Opened:
    """A user's open digest under a key, as `open_or_join` found or made it."""

    id: str
    user: str
    item_count: int
    opened_at: datetime
    created: bool


@dataclass(frozen=True, slots=True)
class Opening:
    """A user's digest to make if they have none open: its id and due time."""

    user: str
    digest_id: str
    due_at: datetime


async def open_or_join(
    session: AsyncSession,
    tenant: str,
    key: str,
    spec: dict[str, Any],
    openings: Sequence[Opening],
    now: datetime,
    *,
    first_sent: bool,
) -> list[Opened]:
    """Each user's open digest under `key`, made (with the opening's id and due time)
    when they have none: two statements for all the users, so two workers adding to one
    user's digest at once meet in the unique index and share it (its row stays locked
    until the caller's transaction ends). A digest whose window closed (due, not sent
    yet) takes no more: it turns `full`, and a new one opens."""
    users = [o.user for o in openings]
    await session.execute(
        update(Digest)
        .where(
            Digest.tenant == tenant,
            Digest.key == key,
            Digest.user_id.in_(users),
            Digest.state == OPEN,
            Digest.due_at <= now,
        )
        .values(state=FULL)
    )
    rows = [
        {
            "id": o.digest_id,
            "tenant": tenant,
            "user_id": o.user,
            "key": key,
            "spec": spec,
            "state": OPEN,
            "item_count": 0,
            "first_sent": first_sent,
            "opened_at": now,
            "last_at": now,
            "due_at": o.due_at,
        }
        for o in openings
    ]
    values = insert(Digest).values(rows)
    statement = values.on_conflict_do_update(
        index_elements=[Digest.tenant, Digest.user_id, Digest.key],
        index_where=text("state = 'open'"),
        set_={"last_at": func.greatest(Digest.last_at, values.excluded.last_at)},
    ).returning(Digest.id, Digest.user_id, Digest.item_count, Digest.opened_at)
    made = {o.user: o.digest_id for o in openings}
    return [
        Opened(found, user, count, opened_at, made[user] == found)
        for found, user, count, opened_at in await session.execute(statement)
    ]


@dataclass(frozen=True, slots=True)
class Item:
    """A notification's item to add to a digest, at `seq`."""

    digest_id: str
    seq: int
    channels: list[str]


async def add_items(
    session: AsyncSession, notification_id: str, item: dict[str, Any], items: Sequence[Item]
) -> set[str]:
    """The notification's item in each digest, once: the digests it was added to (not
    those that had it already)."""
    rows = [
        {
            "digest_id": i.digest_id,
            "notification_id": notification_id,
            "seq": i.seq,
            "channels": i.channels,
            "item": item,
        }
        for i in items
    ]
    statement = (
        insert(DigestItem).values(rows).on_conflict_do_nothing().returning(DigestItem.digest_id)
    )
    return set((await session.scalars(statement)).all())


async def counted(
    session: AsyncSession,
    digest_ids: Sequence[str],
    now: datetime,
    *,
    max_items: int,
    slide_s: float | None,
    cap_s: float,
) -> None:
    """Each digest holds one more item: one that reached `max_items` turns `full`, due
    now (no later notification joins it); with `slide_s`, the others are due that long
    after `now`, at most `cap_s` after they opened."""
    count = Digest.item_count + 1
    due: Any = Digest.due_at
    if slide_s is not None:
        due = func.least(
            now + timedelta(seconds=slide_s), Digest.opened_at + timedelta(seconds=cap_s)
        )
    full = count >= max_items
    await session.execute(
        update(Digest)
        .where(Digest.id.in_(list(digest_ids)))
        .values(
            item_count=count,
            state=case((full, FULL), else_=Digest.state),
            due_at=case((full, now), else_=due),
        )
    )


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


@dataclass(frozen=True, slots=True)
class Gathered:
    """A digest's items as its messages show them (the latest first), and every channel
    one of them was taken on."""

    items: list[dict[str, Any]]
    channels: frozenset[str]


async def items_of(session: AsyncSession, digest_ids: Sequence[str]) -> dict[str, Gathered]:
    """The digests' items, aggregated in PostgreSQL: one row per digest (its items and
    their channels as JSON text, read by orjson), not an ORM object per item (that was
    most of a flush's time at 20 items a digest)."""
    found = {digest_id: Gathered([], frozenset()) for digest_id in digest_ids}
    rows = await session.execute(
        select(
            DigestItem.digest_id,
            cast(func.jsonb_agg(aggregate_order_by(DigestItem.item, DigestItem.seq.desc())), Text),
            cast(func.jsonb_agg(DigestItem.channels), Text),
        )
        .where(DigestItem.digest_id.in_(digest_ids))
        .group_by(DigestItem.digest_id)
    )
    for digest_id, items, channels in rows:
        taken = frozenset(c for listed in orjson.loads(channels) for c in listed)
        found[digest_id] = Gathered(orjson.loads(items), taken)
    return found


async def close(
    session: AsyncSession, digest_ids: Sequence[str], state: str, now: datetime
) -> None:
    """The digests are closed (`sent`, `empty`) at `now`. The session's loaded copies
    are left as they were (no `synchronize_session`): the worker's transaction ends
    here, and matching each loaded digest against the ids showed in a flush's profile."""
    if digest_ids:
        await session.execute(
            update(Digest).where(Digest.id.in_(digest_ids)).values(state=state, closed_at=now),
            execution_options={"synchronize_session": False},
        )


async def postpone(session: AsyncSession, digest_id: str, until: datetime) -> None:
    """Try the digest again at `until` (sending it failed); `full`, so that no item joins
    a digest whose window closed."""
    await session.execute(
        update(Digest)
        .where(Digest.id == digest_id, Digest.state.in_(PENDING))
        .values(state=FULL, due_at=until)
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
