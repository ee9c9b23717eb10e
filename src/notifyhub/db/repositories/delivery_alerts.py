"""Alerts owed by failed deliveries: claimed with a lease, then marked sent, due again
later or given up, each by the claim (a stale claimer changes nothing)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, text, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.expression import ColumnElement

from notifyhub.db.models import DeliveryAlert

_CLAIM_ALERTS = text("""
UPDATE delivery_alerts a
SET claims = a.claims + 1,
    due_at = clock_timestamp() + make_interval(secs => :lease_s)
FROM (
    SELECT id FROM delivery_alerts
    WHERE sent_at IS NULL AND given_up_at IS NULL AND due_at <= clock_timestamp()
    ORDER BY due_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
) c
WHERE a.id = c.id
RETURNING a.id, a.claims, a.channel, a.delivery_id, a.tenant, a.definition, a.attempt,
          a.failures, a.final, a.error,
          (SELECT count(*) FROM delivery_attempts t
           WHERE t.delivery_id = a.delivery_id AND t.attempt <= a.attempt) AS number
""")


@dataclass(frozen=True, slots=True)
class ClaimedAlert:
    id: int
    claims: int
    """How many times it was claimed, this claim included: its tries so far."""
    channel: str
    delivery_id: str
    tenant: str
    definition: str
    """The name of a definition of `tenant` (whose channels and secret the alert uses)."""
    attempt: int
    """The failed attempt's fencing token: with the delivery id, the alert's identity."""
    number: int
    """Its number as the attempts list shows it (1, 2, 3..., however tokens skip): the
    attempts listed up to its token. A failed attempt's row was written with the alert,
    so it is counted; a failure without a send (not confirmed, no retries left) lists no
    attempt and names the last one made, the one that was not confirmed."""
    failures: int
    final: bool
    error: str | None


async def claim(session: AsyncSession, limit: int, lease_s: float) -> list[ClaimedAlert]:
    rows = (await session.execute(_CLAIM_ALERTS, {"limit": limit, "lease_s": lease_s})).all()
    return [
        ClaimedAlert(
            r.id,
            r.claims,
            r.channel,
            r.delivery_id,
            r.tenant,
            r.definition,
            r.attempt,
            r.number,
            r.failures,
            r.final,
            r.error,
        )
        for r in rows
    ]


async def mark_sent(session: AsyncSession, alert_id: int, claims: int) -> bool:
    return await _settle(session, alert_id, claims, sent_at=func.clock_timestamp())


async def retry_in(session: AsyncSession, alert_id: int, claims: int, delay_s: float) -> bool:
    """Due again `delay_s` from now (instead of when the claim's lease ends)."""
    due = func.clock_timestamp() + func.make_interval(0, 0, 0, 0, 0, 0, delay_s)
    return await _settle(session, alert_id, claims, due_at=due)


async def give_up(session: AsyncSession, alert_id: int, claims: int) -> bool:
    """Never claimed again."""
    return await _settle(session, alert_id, claims, given_up_at=func.clock_timestamp())


async def _settle(
    session: AsyncSession, alert_id: int, claims: int, **values: ColumnElement[object]
) -> bool:
    """Set `values` on the alert if `claims` is still its latest claim."""
    result = await session.execute(
        update(DeliveryAlert)
        .where(DeliveryAlert.id == alert_id, DeliveryAlert.claims == claims)
        .values(**values)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
