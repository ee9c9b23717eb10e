"""Escalation: send a notification again on e-mail or Web Push later, unless the user's
copy was seen, read or archived by then (issue 41, docs/attention.md "Escalation").

Where the timer lives: one `escalations` row per user and step, written in the publish's
own transaction (with its channel send, before its copies are placed), due at the
notification's time plus the step's `after_s`. The worker (workers/escalation.py) claims
due rows `FOR UPDATE SKIP LOCKED`, asks every claimed user's copy in one pipeline of Lua
scripts (lua/escalation_check.lua: exists, not expired, not yet seen/read/archived,
atomic with every change to the copy) and adds the e-mail or push deliveries of those
that still take their step (services/escalation_sends.py: the channels' decisions, with
delivery ids derived from the notification, the step and the user), and finishes the
rows, all in one transaction. So:

- no delayed-queue message and no ack: the decision and its deliveries commit together,
  once; a worker killed mid-batch rolls back and the rows are claimed again;
- Redis holds no timer: a FLUSHALL loses none; a check that finds the user's inbox gone,
  or the epoch marker missing or changed (Redis lost data, or is being rebuilt), decides
  nothing and the step is asked again a second later;
- a read committed (in Redis) before the check wins; one after it is too late for that
  step only. A re-check when due is enough: nothing has to remove pending steps when a
  copy is marked, so the mark scripts stay as they are.

Tenant defaults per category apply to publishes naming no `escalate`; they are cached in
each process (reloaded every few seconds), so a publish without escalation asks nothing
of PostgreSQL.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from notifyhub.db.models import Escalation
from notifyhub.db.repositories import escalations as repo
from notifyhub.db.unit import UnitOfWork, each_alone_on_failure
from notifyhub.domain.escalation import Step
from notifyhub.domain.notification import Draft, Notification, to_rfc3339
from notifyhub.errors import NotFound
from notifyhub.services.escalation_sends import StepSender
from notifyhub.store.escalation import Checked, EscalationCheck, Verdict
from notifyhub.store.traces import RoutingTraces

log = logging.getLogger(__name__)

BATCH = 500
"""Steps one transaction runs at most."""
RETRY_S = 1.0
"""How soon a step whose user's inbox is not in Redis (being rebuilt) is asked again."""
FAILED_RETRY_S = 5.0
"""How soon a step that failed (logged) is tried again."""
DEFAULTS_TTL_S = 5.0
"""How long a process serves the tenants' defaults before reloading them."""

EXPIRED = "skipped: the notification expired"
CANCELLED = {
    Verdict.SEEN: "cancelled by seen",
    Verdict.ARCHIVED: "cancelled by archive",
    Verdict.GONE: "skipped: the copy is gone (deleted, recalled or expired)",
}


def escalation_id(notification: Notification, tenant: str, user: str, step: int) -> str:
    """The row's id: a ULID of the notification's time whose random part hashes (tenant,
    notification, user, step), the same every time the publish is handled."""
    created_ms = int(notification.created_at.timestamp() * 1000)
    key = "\x00".join((tenant, notification.id, user, str(step))).encode()
    return str(ULID.from_bytes(created_ms.to_bytes(6, "big") + hashlib.sha256(key).digest()[:10]))


def steps_json(steps: Sequence[Step]) -> list[dict[str, Any]]:
    return [s.model_dump() for s in steps]


def stored_steps(tenant: str, category: str, stored: Any) -> tuple[Step, ...] | None:
    """A tenant default's steps as PostgreSQL holds them; None (logged as an error) when
    they do not read as steps (written by hand, or by an older hub)."""
    try:
        return tuple(Step.model_validate(s) for s in stored)
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        log.error(
            "escalation defaults of tenant %r, category %r are not valid steps, left out "
            "(PUT /v1/admin/escalation-defaults replaces them): %s",
            tenant,
            category,
            exc,
        )
        return None


class EscalationDefaults:
    """The tenants' default steps per category, as this process last loaded them."""

    def __init__(self, ttl_s: float = DEFAULTS_TTL_S) -> None:
        self._by_tenant: dict[str, dict[str, tuple[Step, ...]]] = {}
        self._ttl_s = ttl_s
        self._loaded_at = -float("inf")

    def steps_for(self, tenant: str, category: str | None) -> tuple[Step, ...]:
        if category is None:
            return ()
        return self._by_tenant.get(tenant, {}).get(category, ())

    def stale(self) -> bool:
        return time.monotonic() - self._loaded_at >= self._ttl_s

    async def reload(self, session: AsyncSession) -> None:
        """Every tenant's defaults from PostgreSQL (a category whose stored steps do not
        read is left out, logged: it stops neither the worker nor the other tenants)."""
        loaded: dict[str, dict[str, tuple[Step, ...]]] = {}
        for row in await repo.all_defaults(session):
            steps = stored_steps(row.tenant, row.category, row.steps)
            if steps is not None:
                loaded.setdefault(row.tenant, {})[row.category] = steps
        self._by_tenant = loaded
        self._loaded_at = time.monotonic()

    def put(self, tenant: str, categories: Mapping[str, tuple[Step, ...]]) -> None:
        """This process's copy of a tenant's defaults just replaced."""
        self._by_tenant[tenant] = dict(categories)


@dataclass(frozen=True, slots=True)
class Ran:
    """One step's outcome, for the trace."""

    notification_id: str
    user: str
    step: int
    outcome: str


class Escalations:
    """Schedules steps with publishes, lists and cancels them, and keeps the defaults."""

    def __init__(self, defaults: EscalationDefaults | None = None) -> None:
        self.defaults = defaults or EscalationDefaults()

    def steps_of(self, draft: Draft) -> tuple[Step, ...]:
        """The draft's own steps, else its tenant's default for its category."""
        return draft.escalate or self.defaults.steps_for(draft.tenant, draft.category)

    async def schedule(
        self,
        session: AsyncSession,
        notification: Notification,
        steps: Sequence[Step],
        users: Sequence[str],
        *,
        named_expiry: bool,
    ) -> None:
        """One row per user and step, in the caller's transaction."""
        shown = notification.model_dump(mode="json")
        rows = [
            {
                "id": escalation_id(notification, notification.tenant, user, index),
                "tenant": notification.tenant,
                "user_id": user,
                "notification_id": notification.id,
                "step": index,
                "unless": step.unless,
                "channel": step.channel,
                "due_at": notification.created_at + timedelta(seconds=step.after_s),
                "notification": shown,
                "push_ttl_named": named_expiry,
            }
            for user in users
            for index, step in enumerate(steps, start=1)
        ]
        for start in range(0, len(rows), 1000):  # bound one statement's parameters
            await repo.add_many(session, rows[start : start + 1000])

    async def pending(self, session: AsyncSession, tenant: str, user: str) -> list[Escalation]:
        return await repo.pending_of(session, tenant, user)

    async def cancel(self, session: AsyncSession, tenant: str, user: str, step_id: str) -> None:
        if not await repo.cancel(session, tenant, user, step_id):
            raise NotFound(f"no pending escalation {step_id} of {user} in tenant {tenant}")

    async def get_defaults(self, session: AsyncSession, tenant: str) -> dict[str, tuple[Step, ...]]:
        found = await repo.defaults_of(session, tenant)
        read = {c: stored_steps(tenant, c, steps) for c, steps in found.items()}
        return {c: steps for c, steps in read.items() if steps is not None}

    async def put_defaults(
        self, unit: UnitOfWork, tenant: str, categories: Mapping[str, tuple[Step, ...]]
    ) -> bool:
        """Replace the tenant's defaults (True: it had none, and has some now); this
        process serves them once committed, the others within DEFAULTS_TTL_S."""
        wanted = {c: steps_json(s) for c, s in categories.items() if s}
        created = await repo.replace_defaults(unit.session, tenant, wanted)

        async def serve() -> None:
            self.defaults.put(tenant, {c: s for c, s in categories.items() if s})

        unit.after_commit(serve)
        return created


def _not_sent(checked: Checked) -> tuple[str, str]:
    """(status, outcome) of a step its copy's state cancels or skips."""
    if checked.verdict == Verdict.READ:
        read_at = to_rfc3339(datetime.fromtimestamp(checked.at_ms / 1000, UTC))
        return "cancelled", f"cancelled by read at {read_at}"
    status = "skipped" if checked.verdict == Verdict.GONE else "cancelled"
    return status, CANCELLED[checked.verdict]


class EscalationRunner:
    """Runs due steps, a batch in the caller's unit (workers/escalation.py owns the
    transactions and the clock)."""

    def __init__(
        self,
        check: EscalationCheck,
        sender: StepSender,
        traces: RoutingTraces | None = None,
        defaults: EscalationDefaults | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._clock = clock
        """Now, as due times are compared with (tests move it ahead)."""
        self._check = check
        self._sender = sender
        self._traces = traces
        self.defaults = defaults

    async def run_due(self, unit: UnitOfWork) -> tuple[int, list[Ran]]:
        """Up to BATCH steps due now, in `unit`: how many were claimed, and the outcomes
        of those that ran (the rest are asked again later). The copies are checked in
        one round trip; the deliveries of those that send are added together
        (services/escalation_sends.py); every row is finished in one statement."""
        rows = await repo.claim_due(unit.session, self._clock(), BATCH)
        done: dict[str, tuple[str, str]] = {}
        live = [row for row in rows if not self._expired(row)]
        done |= {row.id: ("skipped", EXPIRED) for row in rows if row not in live}
        sending: list[Escalation] = []
        for row, checked in zip(live, await self._checked(unit, live), strict=True):
            if checked is None:
                continue
            if checked.verdict == Verdict.SEND:
                sending.append(row)
            else:
                done[row.id] = _not_sent(checked)
        done |= await self._send(unit, sending)
        await repo.finish_many(unit.session, done)
        shown = [
            Ran(r.notification_id, r.user_id, r.step, self._shown(r, done[r.id][1]))
            for r in rows
            if r.id in done
        ]
        return len(rows), shown

    async def next_due(self, unit: UnitOfWork) -> datetime | None:
        """When the earliest pending step falls due (None: none is pending)."""
        return await repo.next_due(unit.session)

    def now(self) -> datetime:
        return self._clock()

    async def _checked(self, unit: UnitOfWork, rows: Sequence[Escalation]) -> list[Checked | None]:
        """Each copy's verdict, in one round trip; None where the step is asked again
        later (the user's inbox is not in Redis, or its check failed: logged)."""
        if not rows:
            return []
        asked = [(r.tenant, r.user_id, r.notification_id, r.unless) for r in rows]
        try:
            found = await self._check.check_many(asked)
        except Exception as exc:  # Redis' fault: every check failed alike
            found = [exc] * len(rows)
        verdicts: list[Checked | None] = []
        for row, checked in zip(rows, found, strict=True):
            if isinstance(checked, Exception):
                log.error("escalation %s not checked: %r", row.id, checked)
                await repo.postpone(unit.session, row.id, self._later(FAILED_RETRY_S))
                verdicts.append(None)
            elif checked.verdict == Verdict.UNKNOWN:
                await repo.postpone(unit.session, row.id, self._later(RETRY_S))
                verdicts.append(None)
            else:
                verdicts.append(checked)
        return verdicts

    async def _send(self, unit: UnitOfWork, rows: list[Escalation]) -> dict[str, tuple[str, str]]:
        """The deliveries of the steps that send, (status, outcome) by row id. A step that
        cannot be sent (its stored notification does not read) holds back only itself
        (`each_alone_on_failure`): logged, and tried again later."""
        if not rows:
            return {}

        async def send(batch: Sequence[Escalation]) -> dict[str, str]:
            return await self._sender.send(unit, batch)

        async def failed(row: Escalation) -> None:
            log.exception("escalation %s failed; again in %gs", row.id, FAILED_RETRY_S)
            await repo.postpone(unit.session, row.id, self._later(FAILED_RETRY_S))

        parts = await each_alone_on_failure(unit, rows, send, failed)
        return {
            row_id: ("skipped" if outcome.startswith("skipped") else "sent", outcome)
            for outcomes in parts
            for row_id, outcome in outcomes.items()
        }

    def _expired(self, row: Escalation) -> bool:
        """The notification expired by now (the copy with it, whatever Redis says yet).
        An expiry that does not read (logged) leaves it to the copy's check."""
        expires_at = row.notification.get("expires_at")
        if not expires_at:
            return False
        try:
            return datetime.fromisoformat(expires_at) <= self._clock()
        except (TypeError, ValueError):
            log.error(
                "escalation %s: its notification's expires_at %r does not read", row.id, expires_at
            )
            return False

    @staticmethod
    def _shown(row: Escalation, outcome: str) -> str:
        """A step's line in the trace: its channel, due time and outcome."""
        return f"{row.channel} due {to_rfc3339(row.due_at)}: {outcome}"

    def _later(self, seconds: float) -> datetime:
        return self._clock() + timedelta(seconds=seconds)

    async def trace(self, ran: list[Ran]) -> None:
        """The steps' outcomes in their traces; a failure is logged (the rows hold them)."""
        if self._traces is None or not ran:
            return
        try:
            await self._traces.escalated(
                [(r.notification_id, r.user, r.step, r.outcome) for r in ran]
            )
        except Exception as exc:  # the trace only explains what is committed
            log.warning("escalation outcomes not traced: %s", exc)
