"""The delayed queue's recovery log: message rows and their transition log."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnClause,
    ScalarSelect,
    delete,
    func,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db import driver
from notifyhub.db.models import DelayedMessage, DelayedTransition

FINISHED = ("consumed", "cancelled")
"""Statuses a restore never re-queues (and the retention sweep removes, once old)."""
TRANSITION_COLUMNS = ["message_id", "status", "set_index", "worker", "host"]


async def add(session: AsyncSession, row: DelayedMessage) -> None:
    session.add(row)
    await session.flush()


async def find(session: AsyncSession, message_id: str) -> DelayedMessage | None:
    return await session.get(DelayedMessage, message_id)


async def finish(session: AsyncSession, message_id: str, status: str) -> None:
    """The row's final status (one of FINISHED), and when: the retention counts from it."""
    await session.execute(
        update(DelayedMessage)
        .where(DelayedMessage.id == message_id)
        .values(status=status, finished_at=func.now())
    )


@dataclass(frozen=True, slots=True)
class Finished:
    """A finished message the retention sweep removes: its id and its queue's tenant and name."""

    id: str
    tenant: str
    queue: str


_FINISHED_BEFORE = text("""
SELECT id, tenant, topic FROM delayed_messages
WHERE finished_at < clock_timestamp() - make_interval(secs => :age_s)
  AND status = ANY(:finished)
ORDER BY finished_at
LIMIT :limit
FOR UPDATE SKIP LOCKED
""")
"""Oldest first, through the partial index on finished_at; rows another pass holds are
skipped, so any number of hubs sweep at once."""


async def finished_before(session: AsyncSession, age_s: float, limit: int) -> list[Finished]:
    """Up to `limit` messages of every tenant finished more than `age_s` ago (PostgreSQL's
    clock), locked until the caller's transaction ends."""
    params = {"age_s": age_s, "limit": limit, "finished": list(FINISHED)}
    rows = await session.execute(_FINISHED_BEFORE, params)
    return [Finished(*row) for row in rows]


async def postpone(session: AsyncSession, ids: Sequence[str]) -> None:
    """Count these finished rows' retention from now again."""
    if ids:
        await session.execute(
            update(DelayedMessage)
            .where(DelayedMessage.id.in_(ids))
            .values(finished_at=func.clock_timestamp())
        )


async def remove(session: AsyncSession, ids: Sequence[str], *, unfinished_too: bool = False) -> int:
    """Delete these messages and their transitions; how many messages went. Only finished
    ones (the retention sweep) unless `unfinished_too` (messages made moot before their
    time: a snooze's wake-up once its snooze changed)."""
    if not ids:
        return 0
    query = delete(DelayedMessage).where(DelayedMessage.id.in_(ids))
    if not unfinished_too:
        query = query.where(DelayedMessage.status.in_(FINISHED))
    removed = list(await session.scalars(query.returning(DelayedMessage.id)))
    if removed:
        await session.execute(
            delete(DelayedTransition).where(DelayedTransition.message_id.in_(removed))
        )
    return len(removed)


BODY_ID: ColumnClause[str] = literal_column("body ->> 'id'")
"""The object a message's body names (a snooze wake-up's copy), as its index has it."""


async def unfinished_naming(
    session: AsyncSession,
    tenant: str,
    queue: str,
    ids: Sequence[str],
    match: dict[str, str],
) -> Sequence[DelayedMessage]:
    """`tenant`'s rows of `queue` not consumed or cancelled whose body's `id` is one of
    `ids` and that hold `match` (JSONB containment): the messages about some objects,
    such as the snooze wake-ups of some copies (index `ix_delayed_messages_body_id`)."""
    query = select(DelayedMessage).where(
        DelayedMessage.tenant == tenant,
        DelayedMessage.queue == queue,
        BODY_ID.in_(ids),
        DelayedMessage.status.not_in(FINISHED),
    )
    if match:
        query = query.where(DelayedMessage.body.contains(match))
    return (await session.scalars(query)).all()


async def unfinished(
    session: AsyncSession,
    *,
    tenant: str | None = None,
    expired: bool = True,
    message_id: str | None = None,
    batch: int = 1000,
) -> AsyncIterator[Sequence[DelayedMessage]]:
    """Rows not consumed or cancelled, `batch` at a time (a server-side cursor): of one
    tenant or all (None), or the one id. Without `expired`, not those the transition log
    last records as `reserved` (a consumer took them and has not acked: their ttl runs
    out unseen once Redis lost them), whether due or not; with it, those too."""
    query = select(DelayedMessage).where(DelayedMessage.status.not_in(FINISHED))
    if tenant is not None:
        query = query.where(DelayedMessage.tenant == tenant)
    if message_id is not None:
        query = query.where(DelayedMessage.id == message_id)
    if not expired:
        query = query.where(_last_logged().is_distinct_from("reserved"))
    rows = await session.stream_scalars(query.execution_options(yield_per=batch))
    async for chunk in rows.partitions(batch):
        yield chunk


def _last_logged() -> ScalarSelect[str]:
    """The message's latest status in the transition log (ids grow with each flush),
    NULL when none was flushed yet."""
    return (
        select(DelayedTransition.status)
        .where(DelayedTransition.message_id == DelayedMessage.id)
        .order_by(DelayedTransition.id.desc())
        .limit(1)
        .correlate(DelayedMessage)
        .scalar_subquery()
    )


async def copy_transitions(session: AsyncSession, rows: Iterable[tuple[Any, ...]]) -> None:
    """Rows of `TRANSITION_COLUMNS`, by COPY: far cheaper per row than an INSERT
    executemany (docs/scaling.md, "Design notes")."""
    raw = await driver.of_session(session)
    await raw.copy_records_to_table(
        DelayedTransition.__tablename__, records=rows, columns=TRANSITION_COLUMNS
    )
