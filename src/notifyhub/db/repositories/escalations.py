"""Escalation rows: one per user and step of a notification, pending until the worker
runs it (sent, cancelled, skipped) or an operator cancels it; and each tenant's default
steps per category."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import Escalation, EscalationDefault

PENDING = "pending"


async def add_many(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """The rows, each once (a scheduled publish offered twice adds nothing twice), through
    one statement compiled once per process (a VALUES list was a new statement per
    publish)."""
    if rows:
        await session.execute(_ADD, list(rows))


_ADD = insert(Escalation).on_conflict_do_nothing()


async def claim_due(session: AsyncSession, now: datetime, limit: int) -> list[Escalation]:
    """Up to `limit` pending steps due at `now` that no other worker holds (locked until
    the caller's transaction ends), the earliest first."""
    found = await session.scalars(
        select(Escalation)
        .where(Escalation.status == PENDING, Escalation.due_at <= now)
        .order_by(Escalation.due_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list(found)


async def next_due(session: AsyncSession) -> datetime | None:
    """The earliest pending step's due time (the partial index's first entry)."""
    found: datetime | None = await session.scalar(
        select(func.min(Escalation.due_at)).where(Escalation.status == PENDING)
    )
    return found


async def finish(session: AsyncSession, escalation_id: str, status: str, outcome: str) -> None:
    await session.execute(
        update(Escalation)
        .where(Escalation.id == escalation_id)
        .values(status=status, outcome=outcome[:200], done_at=datetime.now(UTC))
    )


async def finish_many(session: AsyncSession, done: Mapping[str, tuple[str, str]]) -> None:
    """Finish each row: (status, outcome) by id, in one statement."""
    if not done:
        return
    now = datetime.now(UTC)
    rows = [
        {"id": row_id, "status": status, "outcome": outcome[:200], "done_at": now}
        for row_id, (status, outcome) in done.items()
    ]
    await session.execute(update(Escalation), rows)


async def postpone(session: AsyncSession, escalation_id: str, until: datetime) -> None:
    """Ask again at `until` (the user's inbox is being rebuilt, or the step failed)."""
    await session.execute(
        update(Escalation).where(Escalation.id == escalation_id).values(due_at=until)
    )


async def pending_of(session: AsyncSession, tenant: str, user: str) -> list[Escalation]:
    """`user`'s pending steps, the earliest first."""
    found = await session.scalars(
        select(Escalation)
        .where(
            Escalation.tenant == tenant, Escalation.user_id == user, Escalation.status == PENDING
        )
        .order_by(Escalation.due_at, Escalation.id)
    )
    return list(found)


async def cancel(session: AsyncSession, tenant: str, user: str, escalation_id: str) -> bool:
    """Cancel `user`'s pending step `escalation_id`; False when there is none (another
    tenant's or user's id is as missing as none)."""
    done = await session.execute(
        update(Escalation)
        .where(
            Escalation.id == escalation_id,
            Escalation.tenant == tenant,
            Escalation.user_id == user,
            Escalation.status == PENDING,
        )
        .values(status="cancelled", outcome="cancelled by an operator", done_at=datetime.now(UTC))
        .returning(Escalation.id)
    )
    return done.first() is not None


async def find(session: AsyncSession, escalation_id: str) -> Escalation | None:
    return await session.get(Escalation, escalation_id)


async def defaults_of(session: AsyncSession, tenant: str) -> dict[str, list[dict[str, Any]]]:
    """The tenant's default steps, by category."""
    rows = await session.scalars(
        select(EscalationDefault).where(EscalationDefault.tenant == tenant)
    )
    return {d.category: list(d.steps) for d in rows}


async def all_defaults(session: AsyncSession) -> list[EscalationDefault]:
    """Every tenant's defaults (the publish path's cache reloads them)."""
    return list(await session.scalars(select(EscalationDefault)))


async def replace_defaults(
    session: AsyncSession, tenant: str, categories: Mapping[str, list[dict[str, Any]]]
) -> bool:
    """Make the tenant's defaults exactly `categories` (the last to commit wins whole, on
    a transaction-scoped advisory lock); True when the tenant had none before and has
    some now."""
    key = func.hashtextextended(f"escalation-defaults:{tenant}", 0)
    await session.execute(select(func.pg_advisory_xact_lock(key)))
    dropped = await session.execute(
        delete(EscalationDefault)
        .where(EscalationDefault.tenant == tenant)
        .returning(EscalationDefault.category)
    )
    had = dropped.first() is not None
    if categories:
        rows = [{"tenant": tenant, "category": c, "steps": s} for c, s in categories.items()]
        await session.execute(insert(EscalationDefault).values(rows))
    return not had and bool(categories)
