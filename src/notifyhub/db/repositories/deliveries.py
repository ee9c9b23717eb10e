"""Outbox rows: definitions, claims and compare-and-set settlements (flush, never commit).

Every time is PostgreSQL's `clock_timestamp()`, so hubs with skewed clocks agree on what
is due. The `attempt` column is the fencing token: a claim bumps it, and a settlement
only lands `WHERE attempt = <the claimed value>`. A definition is named by (tenant, name);
a delivery has its definition's tenant, and every lookup by id names the tenant too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    TextClause,
    and_,
    bindparam,
    func,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.models import (
    Delivery,
    DeliveryAttempt,
    DeliveryDefinition,
    DeliveryHistory,
)

OPEN = "('pending', 'failed', 'awaiting_confirm')"
DefinitionKey = tuple[str, str]
"""A definition's identity: (tenant, name)."""
_RETURNING = "d.id, d.attempt, d.tenant, d.definition, d.payload, d.status, d.failures"

_INSERT_DUE = """
INSERT INTO deliveries (id, tenant, definition, payload, description, status, attempt,
                        failures, next_attempt_at)
SELECT :id, tenant, name, :payload, :description, 'pending', 0, 0, clock_timestamp()
FROM delivery_definitions
WHERE tenant = :tenant AND name = :definition AND disabled_at IS NULL
"""
"""A pending delivery, due now, if the tenant has the enabled definition."""
_ADD = text(_INSERT_DUE + "RETURNING id").bindparams(bindparam("payload", type_=JSONB))
_ADD_ONCE = text(_INSERT_DUE + "ON CONFLICT (id) DO NOTHING RETURNING id").bindparams(
    bindparam("payload", type_=JSONB)
)

_ADD_MANY_ONCE = text("""
INSERT INTO deliveries (id, tenant, definition, payload, description, status, attempt,
                        failures, next_attempt_at)
SELECT r.id, d.tenant, d.name, r.payload, r.description, 'pending', 0, 0,
       COALESCE(r.due, clock_timestamp())
FROM delivery_definitions d,
     jsonb_to_recordset(:rows) AS r(id varchar, payload jsonb, description varchar,
                                    due timestamptz)
WHERE d.tenant = :tenant AND d.name = :definition AND d.disabled_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM delivery_history h WHERE h.id = r.id)
ON CONFLICT (id) DO NOTHING
RETURNING id
""").bindparams(bindparam("rows", type_=JSONB))
"""`_ADD_ONCE` for many rows of one definition in one statement."""

_KNOWN = text("""
SELECT 1 FROM deliveries WHERE id = :id
UNION ALL SELECT 1 FROM delivery_history WHERE id = :id
LIMIT 1
""")

_CLAIM_DUE = text(f"""
UPDATE deliveries d
SET attempt = d.attempt + 1,
    next_attempt_at = clock_timestamp() + make_interval(secs => :lease_s)
FROM (
    SELECT id, attempt FROM deliveries
    WHERE status IN {OPEN} AND next_attempt_at <= clock_timestamp()
    ORDER BY next_attempt_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
) c
WHERE d.id = c.id AND d.attempt = c.attempt
RETURNING {_RETURNING}
""")

_CLAIM_EXACT = text(f"""
UPDATE deliveries d
SET attempt = d.attempt + 1,
    next_attempt_at = clock_timestamp() + make_interval(secs => :lease_s)
FROM unnest(CAST(:ids AS text[]), CAST(:attempts AS int[])) AS c(id, attempt)
WHERE d.id = c.id AND d.attempt = c.attempt AND d.status IN {OPEN}
RETURNING {_RETURNING}
""")

_CONFIRMED = "d.status = 'sent'"
"""A row a settlement lands on is `sent` only when it was confirmed while the attempt
was under way (claims take open rows only; a manual retry moves the token on)."""

_SETTLE = text(f"""
WITH s AS (
    SELECT * FROM unnest(
        CAST(:ids AS text[]), CAST(:attempts AS int[]), CAST(:statuses AS text[]),
        CAST(:failures AS int[]), CAST(:delays AS float8[]), CAST(:errors AS text[]),
        CAST(:status_codes AS int[]), CAST(:durations_ms AS float8[]),
        CAST(:definitions AS text[]), CAST(:gone AS bool[]), CAST(:attempted AS bool[])
    ) AS s(id, attempt, status, failures, delay_s, error, status_code, duration_ms,
           definition, gone, attempted)
), landed AS (
    UPDATE deliveries d
    SET status = CASE WHEN {_CONFIRMED} THEN d.status ELSE s.status END,
        failures = CASE WHEN {_CONFIRMED} THEN d.failures ELSE s.failures END,
        next_attempt_at = CASE WHEN {_CONFIRMED} THEN clock_timestamp()
                          ELSE clock_timestamp() + make_interval(secs => s.delay_s) END,
        last_attempt_at = CASE WHEN s.attempted THEN clock_timestamp()
                          ELSE d.last_attempt_at END,
        last_error = CASE WHEN {_CONFIRMED} THEN d.last_error ELSE s.error END,
        finished_at = CASE WHEN {_CONFIRMED} THEN d.finished_at
                           WHEN s.status IN ('sent', 'final_failed') THEN clock_timestamp() END
    FROM s
    WHERE d.id = s.id AND d.attempt = s.attempt
    RETURNING d.id, d.tenant, d.status
), attempts AS (
    INSERT INTO delivery_attempts (delivery_id, attempt, status_code, error, duration_ms)
    SELECT s.id, s.attempt, s.status_code, s.error, s.duration_ms FROM s JOIN landed USING (id)
    WHERE s.attempted
), alerts AS (
    INSERT INTO delivery_alerts (delivery_id, attempt, channel, tenant, definition, failures,
                                 final, error, claims)
    SELECT s.id, s.attempt, a.channel, landed.tenant, s.definition, s.failures,
           s.status = 'final_failed', s.error, 0
    FROM unnest(CAST(:alert_ids AS text[]), CAST(:alert_channels AS text[])) AS a(id, channel)
    JOIN s USING (id) JOIN landed USING (id)
    WHERE landed.status = s.status
), disabled AS (
    UPDATE delivery_definitions SET disabled_at = now()
    WHERE (tenant, name) IN (
        SELECT landed.tenant, s.definition FROM s JOIN landed USING (id) WHERE s.gone
    )
)
SELECT id FROM landed
""")
"""The fenced settlement. On a delivery confirmed while its attempt was under way it
records the attempt (as the receiver answered it) and leaves the delivery `sent`: no
status, failure count, error or alert of its own. An outcome not `attempted` (nothing
was sent) settles the delivery and owes its alerts, but lists no attempt: its error is
the delivery's `last_error`."""

_UNDER_WAY = """(d.attempt > 0 AND d.next_attempt_at > clock_timestamp() AND NOT EXISTS (
    SELECT 1 FROM delivery_attempts t WHERE t.delivery_id = d.id AND t.attempt = d.attempt))"""
"""An attempt is under way: its token was claimed (a claim moves `next_attempt_at` to its
lease's end), it has not settled (a settlement lists it) and its lease has not run out
(a sender past it is dead; its settlement would be fenced out by the next claim)."""

_CONFIRM = text(f"""
UPDATE deliveries d
SET status = 'sent',
    finished_at = clock_timestamp(),
    last_error = NULL,
    next_attempt_at = CASE WHEN {_UNDER_WAY} THEN d.next_attempt_at ELSE clock_timestamp() END
WHERE d.id = :id AND d.tenant = :tenant
  AND (d.status = 'awaiting_confirm'
       OR (d.status IN ('pending', 'failed') AND {_UNDER_WAY} AND EXISTS (
           SELECT 1 FROM delivery_definitions f
           WHERE f.tenant = d.tenant AND f.name = d.definition AND f.need_confirm)))
RETURNING d.id
""")

_TO_HISTORY = text("""
WITH moved AS (
    DELETE FROM deliveries WHERE id IN (
        SELECT id FROM deliveries
        WHERE finished_at IS NOT NULL
          AND finished_at < clock_timestamp() - make_interval(secs => :age_s)
          AND next_attempt_at <= clock_timestamp()
        LIMIT :limit
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *
)
INSERT INTO delivery_history SELECT * FROM moved
""")
"""Finished deliveries, once old enough and with no attempt under way (one confirmed
mid-attempt keeps its lease as `next_attempt_at` until its settlement lands)."""

_FROM_HISTORY = text("""
WITH moved AS (DELETE FROM delivery_history WHERE id = :id AND tenant = :tenant RETURNING *)
INSERT INTO deliveries SELECT * FROM moved
""")


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery whose attempt number `attempt` this worker now owns."""

    id: str
    attempt: int
    tenant: str
    definition: str
    payload: Any
    status: str
    failures: int

    @property
    def definition_key(self) -> DefinitionKey:
        return self.tenant, self.definition


@dataclass(frozen=True, slots=True)
class Settlement:
    id: str
    attempt: int
    status: str
    failures: int
    delay_s: float
    error: str | None
    status_code: int | None
    duration_ms: float
    alert_channels: tuple[str, ...] = ()
    definition: str = ""
    disable_definition: bool = False
    attempted: bool = True
    """Something was sent: the attempt is listed. An unconfirmed delivery out of retries
    fails without a send; its reason is the delivery's `last_error`, not an attempt."""


def _claimed(rows: Sequence[Any]) -> list[Claimed]:
    return [
        Claimed(r.id, r.attempt, r.tenant, r.definition, r.payload, r.status, r.failures)
        for r in rows
    ]


async def upsert_definition(
    session: AsyncSession, values: dict[str, Any], new_secret: str
) -> tuple[DeliveryDefinition, bool]:
    """Create or replace a definition (its secret survives a replace); True when created.

    `values` names the definition's `tenant` and `name`: its identity.
    """
    statement = (
        insert(DeliveryDefinition)
        .values(**values, secret=new_secret)
        .on_conflict_do_update(
            index_elements=[DeliveryDefinition.tenant, DeliveryDefinition.name],
            set_={**values, "updated_at": func.now(), "disabled_at": None},
        )
        .returning(DeliveryDefinition, text("xmax = 0 AS created"))
    )
    row = (await session.execute(statement)).one()
    return row[0], bool(row[1])


async def add_definition_once(session: AsyncSession, values: dict[str, Any]) -> None:
    """Create the definition `values` name (`tenant`, `name`) unless it exists (one the
    tenant defined stays as it is)."""
    await session.execute(insert(DeliveryDefinition).values(**values).on_conflict_do_nothing())


def _named(tenant: str, name: str) -> ColumnElement[bool]:
    return and_(DeliveryDefinition.tenant == tenant, DeliveryDefinition.name == name)


async def rotate_secret(session: AsyncSession, tenant: str, name: str, new_secret: str) -> None:
    await session.execute(
        update(DeliveryDefinition)
        .where(_named(tenant, name))
        .values(previous_secret=DeliveryDefinition.secret, secret=new_secret)
    )


async def drop_previous_secret(session: AsyncSession, tenant: str, name: str) -> None:
    await session.execute(
        update(DeliveryDefinition).where(_named(tenant, name)).values(previous_secret=None)
    )


async def definition(session: AsyncSession, tenant: str, name: str) -> DeliveryDefinition | None:
    return await session.get(
        DeliveryDefinition, {"tenant": tenant, "name": name}, populate_existing=True
    )


async def definitions(
    session: AsyncSession, keys: set[DefinitionKey]
) -> dict[DefinitionKey, DeliveryDefinition]:
    """Definitions by (tenant, name)."""
    rows = await session.scalars(
        select(DeliveryDefinition).where(
            tuple_(DeliveryDefinition.tenant, DeliveryDefinition.name).in_(keys)
        )
    )
    return {(row.tenant, row.name): row for row in rows}


async def _insert(
    session: AsyncSession,
    statement: TextClause,
    delivery_id: str,
    tenant: str,
    definition: str,
    payload: Any,
    description: str | None,
) -> bool:
    """Run one of the pending-delivery INSERTs; True when it added the row."""
    params = {
        "id": delivery_id,
        "tenant": tenant,
        "definition": definition,
        "payload": payload,
        "description": description,
    }
    return (await session.execute(statement, params)).first() is not None


async def add(
    session: AsyncSession,
    delivery_id: str,
    tenant: str,
    definition: str,
    payload: Any,
    description: str | None,
) -> bool:
    """A pending delivery, due now, if `tenant` has an enabled `definition`; True if added.

    The definition's check is folded into the INSERT: one round trip, no lookup first.
    """
    return await _insert(session, _ADD, delivery_id, tenant, definition, payload, description)


async def add_once(
    session: AsyncSession,
    delivery_id: str,
    tenant: str,
    definition: str,
    payload: Any,
    description: str | None,
) -> bool | None:
    """`add` for an id that may already be there: True added, False it already was
    (in the outbox or its history), None `tenant` has no enabled `definition`."""
    args = (delivery_id, tenant, definition, payload, description)
    if await _insert(session, _ADD_ONCE, *args):
        return True
    if (await session.execute(_KNOWN, {"id": delivery_id})).first() is not None:
        return False
    return None


async def add_many_once(
    session: AsyncSession,
    tenant: str,
    definition: str,
    rows: Sequence[tuple[str, Any, str | None]],
    due: Mapping[str, datetime] | None = None,
) -> list[str]:
    """`add_once` for many (id, payload, description) of one enabled definition, in one
    statement; the ids added (an id already in the outbox or its history is not). An id
    in `due` is first due then (quiet hours), the others now."""
    if not rows:
        return []
    at = {key: when.isoformat() for key, when in (due or {}).items()}
    found = [
        {"id": i, "payload": payload, "description": d, "due": at.get(i)} for i, payload, d in rows
    ]
    params = {"tenant": tenant, "definition": definition, "rows": found}
    return [row[0] for row in (await session.execute(_ADD_MANY_ONCE, params)).all()]


async def claim_due(session: AsyncSession, limit: int, lease_s: float) -> list[Claimed]:
    """Take up to `limit` due deliveries that no other worker holds (SKIP LOCKED)."""
    result = await session.execute(_CLAIM_DUE, {"limit": limit, "lease_s": lease_s})
    return _claimed(result.all())


async def claim_exact(
    session: AsyncSession, expected: Sequence[tuple[str, int]], lease_s: float
) -> list[Claimed]:
    """Compare-and-set: own each delivery only if its attempt is still the expected one."""
    params = {
        "ids": [delivery_id for delivery_id, _ in expected],
        "attempts": [attempt for _, attempt in expected],
        "lease_s": lease_s,
    }
    return _claimed((await session.execute(_CLAIM_EXACT, params)).all())


async def settle(session: AsyncSession, settlements: Sequence[Settlement]) -> set[str]:
    """Record outcomes whose attempt is still current; the ids that landed.

    One statement: the fenced UPDATE, and only for the rows it updated, their attempt
    rows (of attempts that sent something), the alerts they owe and a 410's disabled
    definition. So each attempt is settled
    exactly once however many workers raced for it, atomically even in autocommit.
    """
    alerts = [(s.id, channel) for s in settlements for channel in s.alert_channels]
    params = {
        "ids": [s.id for s in settlements],
        "attempts": [s.attempt for s in settlements],
        "statuses": [s.status for s in settlements],
        "failures": [s.failures for s in settlements],
        "delays": [s.delay_s for s in settlements],
        "errors": [s.error for s in settlements],
        "status_codes": [s.status_code for s in settlements],
        "durations_ms": [s.duration_ms for s in settlements],
        "definitions": [s.definition for s in settlements],
        "gone": [s.disable_definition for s in settlements],
        "attempted": [s.attempted for s in settlements],
        "alert_ids": [delivery_id for delivery_id, _ in alerts],
        "alert_channels": [channel for _, channel in alerts],
    }
    return {row.id for row in (await session.execute(_SETTLE, params)).all()}


async def find(
    session: AsyncSession, tenant: str, delivery_id: str
) -> Delivery | DeliveryHistory | None:
    """The delivery, live or archived, if it belongs to `tenant` (else None, as if absent)."""
    live = await session.scalar(
        select(Delivery)
        .where(Delivery.id == delivery_id, Delivery.tenant == tenant)
        .execution_options(populate_existing=True)
    )
    return live or await session.scalar(
        select(DeliveryHistory).where(
            DeliveryHistory.id == delivery_id, DeliveryHistory.tenant == tenant
        )
    )


async def attempts(session: AsyncSession, delivery_id: str) -> list[DeliveryAttempt]:
    """The delivery's settled attempts, oldest first (fencing tokens only ever grow)."""
    rows = await session.scalars(
        select(DeliveryAttempt)
        .where(DeliveryAttempt.delivery_id == delivery_id)
        .order_by(DeliveryAttempt.attempt)
    )
    return list(rows)


async def confirm(session: AsyncSession, tenant: str, delivery_id: str) -> bool:
    """`sent`, if `awaiting_confirm` or, for a definition with `need_confirm`, while an
    attempt is under way (a receiver confirming from inside its handler); True if so.

    The token is not moved: the attempt under way still settles, listed as the receiver
    answered it, and leaves the delivery `sent` (`_SETTLE`); no claim takes a `sent` row.
    """
    result = await session.execute(_CONFIRM, {"id": delivery_id, "tenant": tenant})
    return result.first() is not None


async def reopen(session: AsyncSession, tenant: str, delivery_id: str) -> int | None:
    """Manual replay: back to pending and due now (from history if it moved there).

    Bumps the fencing token (a send still in flight cannot settle over the replay) and
    returns it (the one an at-once send must claim), or None when `tenant` has no such
    delivery. The token is not an attempt count: the API numbers attempts itself.
    """
    await session.execute(_FROM_HISTORY, {"id": delivery_id, "tenant": tenant})
    result = await session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id, Delivery.tenant == tenant)
        .values(
            status="pending",
            failures=0,
            attempt=Delivery.attempt + 1,
            next_attempt_at=func.clock_timestamp(),
            finished_at=None,
            last_error=None,
        )
        .returning(Delivery.attempt)
    )
    return result.scalar_one_or_none()


async def move_to_history(session: AsyncSession, age_s: float, limit: int) -> int:
    result = await session.execute(_TO_HISTORY, {"age_s": age_s, "limit": limit})
    return int(result.rowcount)  # type: ignore[attr-defined]


async def counts(session: AsyncSession) -> tuple[dict[str, int], float]:
    """Live deliveries by status, and the age in seconds of the oldest due open one."""
    rows = await session.execute(select(Delivery.status, func.count()).group_by(Delivery.status))
    by_status = {str(status): int(n) for status, n in rows.all()}
    oldest = await session.scalar(
        text(
            f"SELECT EXTRACT(EPOCH FROM clock_timestamp() - min(next_attempt_at)) "
            f"FROM deliveries WHERE status IN {OPEN} AND next_attempt_at <= clock_timestamp()"
        )
    )
    return by_status, float(oldest or 0.0)
