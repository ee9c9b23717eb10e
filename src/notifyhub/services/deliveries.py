"""Reliable deliveries (Design 2, docs/origins.md): definitions, the outbox, confirm, replay.

Library mode, for code that shares notifyhub's PostgreSQL::

    from notifyhub.db.unit import UnitOfWork
    from notifyhub.services.deliveries import enqueue

    async with UnitOfWork(sessionmaker) as unit:     # your business transaction
        unit.session.add(order)
        delivery_id = await enqueue(unit, "order-paid", {"order": order.id}, tenant="shop-1")
    # committed: a notifyhub dispatcher sends it (at once when `sender=` is given);
    # rolled back: the row never existed, nothing is ever sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from notifyhub.db.models import Delivery, DeliveryDefinition, DeliveryHistory
from notifyhub.db.repositories import deliveries as repo
from notifyhub.db.repositories.listings import SUMMARY_COLUMNS
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.delivery import AlertTrigger, DeliveryStatus
from notifyhub.domain.notification import to_rfc3339
from notifyhub.errors import Conflict, InvalidInput, NotFound
from notifyhub.services import signing
from notifyhub.services.targets import TargetCheck
from notifyhub.services.templates import check as check_template

_PENDING_KEY = "notifyhub.deliveries.after_commit"
DEFAULT_TENANT = "default"


class Kicker(Protocol):
    """Whatever sends (delivery id, attempt) pairs at once; `DeliverySender` in the hub."""

    def kick(self, expected: Iterable[tuple[str, int]]) -> None: ...


@dataclass(frozen=True, slots=True)
class DefinitionSpec:
    url: str
    """The webhook receiver; empty for other kinds."""
    timeout_s: float
    retry_intervals: str
    max_retries: int
    alert_trigger: AlertTrigger
    alert_after_n: int | None
    alert_emails: list[str]
    alert_webhook_url: str | None
    need_confirm: bool
    max_confirm_delay_s: int
    kind: str = "webhook"
    email: dict[str, Any] | None = None
    """For `email`: `to`, `subject`, `text`, `html`, `locales` (templates)."""
    rabbitmq: dict[str, Any] | None = None
    """For `rabbitmq`: `exchange` and `routing_key`."""


def _check_templates(email: dict[str, Any] | None) -> None:
    """A template that cannot parse, or is hostile on its face, is the client's (422)."""
    if email is None:
        return
    places = [("email", email)] + [
        (f"email.locales.{tag}", templates) for tag, templates in email.get("locales", {}).items()
    ]
    for place, found in places:
        for field in ("subject", "text", "html"):
            if found.get(field):
                check_template(found[field], f"{place}.{field}")


def _after_commit(unit: UnitOfWork, sender: Kicker, expected: tuple[str, int]) -> None:
    """Send `expected` at once after `unit` commits (never after a rollback): one kick
    per unit, however many deliveries it adds."""
    pending = unit.info.get(_PENDING_KEY)
    if isinstance(pending, list):
        pending.append(expected)
        return
    pending = unit.info[_PENDING_KEY] = [expected]

    async def kick() -> None:
        sender.kick(pending)

    unit.after_commit(kick)


async def enqueue(
    unit: UnitOfWork,
    definition: str,
    payload: dict[str, Any],
    description: str | None = None,
    *,
    tenant: str = DEFAULT_TENANT,
    sender: Kicker | None = None,
) -> str:
    """Add a delivery on `tenant`'s `definition` inside the caller's transaction; its id
    (the `webhook-id`).

    Nothing is sent before the caller commits, and nothing ever for a rollback. With a
    `sender` it is attempted at once after the commit; any notifyhub dispatcher sharing
    the database sends it otherwise (and retries it either way).
    """
    delivery_id = await _add(unit.session, tenant, definition, payload, description)
    if sender is not None:
        _after_commit(unit, sender, (delivery_id, 0))
    return delivery_id


async def enqueue_once(
    unit: UnitOfWork,
    delivery_id: str,
    definition: str,
    payload: dict[str, Any],
    description: str | None = None,
    *,
    tenant: str = DEFAULT_TENANT,
    sender: Kicker | None = None,
) -> bool:
    """`enqueue` under an id the caller derives from what it reports (say, one action's
    completion), so asking again adds nothing: True added, False already there."""
    session = unit.session
    added = await repo.add_once(session, delivery_id, tenant, definition, payload, description)
    if added is None:
        await _refuse(session, tenant, definition)
    if added and sender is not None:
        _after_commit(unit, sender, (delivery_id, 0))
    return bool(added)


async def enqueue_many_once(
    unit: UnitOfWork,
    definition: str,
    rows: list[tuple[str, dict[str, Any], str | None]],
    *,
    tenant: str = DEFAULT_TENANT,
    sender: Kicker | None = None,
    due: Mapping[str, datetime] | None = None,
) -> int:
    """`enqueue_once` for many (id, payload, description) of one definition in one
    statement; how many were added (none when the definition is missing or disabled:
    the caller checked it). An id in `due` is first tried then (the dispatcher sends it),
    not at once."""
    added = await repo.add_many_once(unit.session, tenant, definition, rows, due)
    if sender is not None:
        for delivery_id in added:
            if not due or delivery_id not in due:
                _after_commit(unit, sender, (delivery_id, 0))
    return len(added)


async def _refuse(session: AsyncSession, tenant: str, definition: str) -> None:
    """Why `tenant`'s `definition` takes no delivery: missing, or disabled."""
    if await repo.definition(session, tenant, definition) is None:
        raise InvalidInput(f"definition: no delivery definition {definition!r}")
    raise Conflict(f"definition {definition!r} is disabled (its receiver answered 410)")


async def _add(
    session: AsyncSession,
    tenant: str,
    definition: str,
    payload: dict[str, Any],
    description: str | None,
) -> str:
    delivery_id = str(ULID())
    if not await repo.add(session, delivery_id, tenant, definition, payload, description):
        await _refuse(session, tenant, definition)
    return delivery_id


def definition_json(row: DeliveryDefinition, show_secret: bool) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "tenant": row.tenant,
        "name": row.name,
        "kind": row.kind,
        "url": row.url if row.kind == "webhook" else None,
        "email": row.email,
        "rabbitmq": row.rabbitmq,
        "timeout_s": row.timeout_s,
        "retry_intervals": row.retry_intervals,
        "max_retries": row.max_retries,
        "alert": {
            "trigger": row.alert_trigger,
            "after_n": row.alert_after_n,
            "emails": row.alert_emails,
            "webhook_url": row.alert_webhook_url,
        },
        "need_confirm": row.need_confirm,
        "max_confirm_delay_s": row.max_confirm_delay_s,
        "disabled": row.disabled_at is not None,
        "rotating": row.previous_secret is not None,
    }
    if show_secret:
        shown["secret"] = row.secret
    return shown


def _time(value: Any) -> str | None:
    return to_rfc3339(value) if value is not None else None


class DeliveryService:
    """What the HTTP API does with deliveries, in the caller's session or unit of work."""

    def __init__(self, sender: Kicker, targets: TargetCheck) -> None:
        self.sender = sender
        self._targets = targets

    async def _check_targets(self, spec: DefinitionSpec) -> list[str]:
        """Refuse URLs the SSRF guard would always block; warnings about the others."""
        urls = [("url", spec.url), ("alert.webhook_url", spec.alert_webhook_url)]
        warnings = [await self._targets.check(field, url) for field, url in urls if url]
        return [warning for warning in warnings if warning]

    async def put_definition(
        self,
        session: AsyncSession,
        tenant: str,
        name: str,
        spec: DefinitionSpec,
        rotate: bool,
        drop: bool,
    ) -> tuple[dict[str, Any], bool]:
        """Create or replace `tenant`'s definition `name`; the secret is shown on creation
        and on rotation, with `warnings` about its URLs (a host that does not resolve
        now). A URL the SSRF guard blocks is refused (`BlockedTarget`), nothing stored."""
        _check_templates(spec.email)
        warnings = await self._check_targets(spec)
        values = {
            "tenant": tenant,
            "name": name,
            **asdict(spec),
            "alert_trigger": spec.alert_trigger.value,
        }
        row, created = await repo.upsert_definition(session, values, signing.new_secret())
        if rotate and not created:
            await repo.rotate_secret(session, tenant, name, signing.new_secret())
        if drop:
            await repo.drop_previous_secret(session, tenant, name)
        if rotate or drop:
            row = await repo.definition(session, tenant, name) or row
        shown = definition_json(row, show_secret=created or rotate)
        return {**shown, "warnings": warnings}, created

    async def get_definition(self, session: AsyncSession, tenant: str, name: str) -> dict[str, Any]:
        row = await repo.definition(session, tenant, name)
        if row is None:
            raise NotFound(f"no delivery definition {name}")
        return definition_json(row, show_secret=False)

    async def create(
        self,
        unit: UnitOfWork,
        tenant: str,
        definition: str,
        payload: dict[str, Any],
        description: str | None,
    ) -> str:
        """Add a delivery on `tenant`'s `definition`, sent at once after `unit` commits (an
        autocommit unit suits: one INSERT, no BEGIN and COMMIT round trips)."""
        sender = self.sender
        return await enqueue(unit, definition, payload, description, tenant=tenant, sender=sender)

    async def get(self, session: AsyncSession, tenant: str, delivery_id: str) -> dict[str, Any]:
        """The delivery and its attempts; another tenant's is as missing as an unknown id.

        Attempts are numbered 1, 2, 3... in the order they were made. Their stored
        `attempt` is the fencing token, which also moves on a manual retry (to fence out
        a send in flight), so it skips numbers: it orders, never counts.
        """
        row = await repo.find(session, tenant, delivery_id)
        if row is None:
            raise NotFound(f"no delivery {delivery_id}")
        attempts = await repo.attempts(session, delivery_id)  # in fencing-token order
        return {
            **_row_json(row),
            "attempts": [
                {
                    "attempt": number,
                    "at": to_rfc3339(a.at),
                    "status_code": a.status_code,
                    "error": a.error,
                    "duration_ms": round(a.duration_ms, 3),
                }
                for number, a in enumerate(attempts, start=1)
            ],
        }

    async def confirm(self, session: AsyncSession, tenant: str, delivery_id: str) -> dict[str, Any]:
        """`sent`: a delivery `awaiting_confirm`, or one of a `need_confirm` definition
        while an attempt is under way (its receiver confirming before it answers); a
        confirm of a `sent` one changes nothing. 409 otherwise."""
        if not await repo.confirm(session, tenant, delivery_id):
            row = await repo.find(session, tenant, delivery_id)
            if row is None:
                raise NotFound(f"no delivery {delivery_id}")
            if row.status != DeliveryStatus.SENT:
                raise Conflict(await _unconfirmable(session, row))
        return await self.get(session, tenant, delivery_id)

    async def retry(self, unit: UnitOfWork, tenant: str, delivery_id: str) -> dict[str, Any]:
        """Manual replay: pending again, sent at once after `unit` commits."""
        attempt = await repo.reopen(unit.session, tenant, delivery_id)
        if attempt is None:
            raise NotFound(f"no delivery {delivery_id}")
        _after_commit(unit, self.sender, (delivery_id, attempt))
        return await self.get(unit.session, tenant, delivery_id)


async def _unconfirmable(session: AsyncSession, row: Delivery | DeliveryHistory) -> str:
    """Why a confirm of `row` (not `sent`) is refused."""
    definition = await repo.definition(session, row.tenant, row.definition)
    if definition is None or not definition.need_confirm:
        return (
            f"delivery {row.id} is {row.status}: its definition {row.definition!r} has no "
            "need_confirm, so it is never awaiting_confirm"
        )
    return (
        f"delivery {row.id} is {row.status}: only a delivery awaiting_confirm, or one whose "
        "attempt is under way, can be confirmed"
    )


def _row_json(row: Delivery | DeliveryHistory) -> dict[str, Any]:
    columns = {c: getattr(row, c) for c in SUMMARY_COLUMNS}
    return {**delivery_summary(columns), "payload": row.payload}


def delivery_summary(columns: dict[str, Any]) -> dict[str, Any]:
    """A delivery's JSON without its payload and attempts (the admin list's items)."""
    status = columns["status"]
    return {
        "id": columns["id"],
        "tenant": columns["tenant"],
        "definition": columns["definition"],
        "status": status,
        "description": columns["description"],
        "failures": columns["failures"],
        "created_at": _time(columns["created_at"]),
        "last_attempt_at": _time(columns["last_attempt_at"]),
        "next_attempt_at": _time(columns["next_attempt_at"])
        if status in ("pending", "failed", "awaiting_confirm")
        else None,
        "last_error": columns["last_error"],
        "finished_at": _time(columns["finished_at"]),
    }
