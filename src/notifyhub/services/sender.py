"""Attempts: claim (compare-and-set), send outside any transaction, settle (fenced).

The same steps serve the at-once send after commit (`kick`) and the dispatcher's retries
(`attempt_due`); whichever claims an attempt first owns it, the other finds nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from asyncio import FIRST_COMPLETED
from collections import deque
from collections.abc import Iterable, Sequence

import orjson

from notifyhub.db.models import DeliveryDefinition
from notifyhub.db.repositories import deliveries as repo
from notifyhub.db.repositories.deliveries import Claimed, DefinitionKey, Settlement
from notifyhub.db.unit import Units
from notifyhub.delivery_metrics import DeliveryMetrics
from notifyhub.domain.delivery import (
    AlertPolicy,
    AlertTrigger,
    DeliveryStatus,
    Outcome,
    RetryPolicy,
    parse_intervals,
)
from notifyhub.services import signing
from notifyhub.services.email_target import EmailTarget
from notifyhub.services.outbound import Outbound
from notifyhub.services.rabbitmq_target import RabbitTarget
from notifyhub.services.webpush_target import WebPushTarget
from notifyhub.settings import DeliverySettings
from notifyhub.tracing import Attributes, Tracing

log = logging.getLogger(__name__)

INLINE_BATCH = 500
INLINE_BATCHES = 4
PIPELINED = 2
"""Due batches in flight at once: the next is claimed and sending while the slowest
sends of the last one finish, so the send slots stay busy (the bench's RabbitMQ and
e-mail rows: one batch at a time left them idle between batches)."""
DEFINITION_TTL_S = 1.0


def _channels(definition: DeliveryDefinition) -> tuple[str, ...]:
    channels = ("email",) if definition.alert_emails else ()
    return channels + (("webhook",) if definition.alert_webhook_url else ())


def _settlement(
    claimed: Claimed,
    outcome: Outcome,
    status: DeliveryStatus,
    failures: int,
    delay_s: float,
    alert_channels: tuple[str, ...] = (),
) -> Settlement:
    return Settlement(
        id=claimed.id,
        attempt=claimed.attempt,
        status=status,
        failures=failures,
        delay_s=delay_s,
        error=outcome.error,
        status_code=outcome.status_code,
        duration_ms=outcome.duration_s * 1000,
        alert_channels=alert_channels,
        definition=claimed.definition,
        disable_definition=outcome.gone,
        attempted=outcome.attempted,
    )


def _policy(definition: DeliveryDefinition, jitter: float) -> RetryPolicy:
    return RetryPolicy(parse_intervals(definition.retry_intervals), definition.max_retries, jitter)


def _prior_failures(claimed: Claimed) -> int:
    """Failures so far; an attempt that was never confirmed in time counts as one."""
    return claimed.failures + (1 if claimed.status == DeliveryStatus.AWAITING_CONFIRM else 0)


def out_of_retries(claimed: Claimed, definition: DeliveryDefinition) -> bool:
    """An unconfirmed delivery whose last retry is used up: fail it instead of re-sending."""
    unconfirmed = claimed.status == DeliveryStatus.AWAITING_CONFIRM
    return unconfirmed and _policy(definition, 0.0).exhausted(_prior_failures(claimed))


def plan(
    claimed: Claimed, definition: DeliveryDefinition | None, outcome: Outcome, jitter: float
) -> Settlement:
    """What an attempt's outcome does to its delivery (pure: no I/O)."""
    prior = _prior_failures(claimed)
    if definition is None:
        return _settlement(claimed, outcome, DeliveryStatus.FINAL_FAILED, prior + 1, 0)
    if outcome.ok:
        if definition.need_confirm:
            wait_s = float(definition.max_confirm_delay_s)
            return _settlement(claimed, outcome, DeliveryStatus.AWAITING_CONFIRM, prior, wait_s)
        return _settlement(claimed, outcome, DeliveryStatus.SENT, prior, 0.0)
    failures = prior + (1 if outcome.attempted else 0)
    policy = _policy(definition, jitter)
    stopped = outcome.gone or outcome.final or definition.disabled_at is not None
    final = stopped or policy.exhausted(failures)
    alert = AlertPolicy(AlertTrigger(definition.alert_trigger), definition.alert_after_n)
    channels = _channels(definition) if alert.fires(failures, final) else ()
    if final:
        return _settlement(claimed, outcome, DeliveryStatus.FINAL_FAILED, failures, 0.0, channels)
    delay_s = policy.delay_s(failures, outcome.retry_after_s)
    return _settlement(claimed, outcome, DeliveryStatus.FAILED, failures, delay_s, channels)


class DeliverySender:
    """Owns the outbound client, the at-once queue and the task that drains it. Claims
    and settlements are autocommitted units of its own: the send falls between them."""

    def __init__(
        self,
        units: Units,
        outbound: Outbound,
        settings: DeliverySettings,
        metrics: DeliveryMetrics,
        tracing: Tracing | None = None,
        email: EmailTarget | None = None,
        rabbitmq: RabbitTarget | None = None,
        webpush: WebPushTarget | None = None,
    ) -> None:
        self._units = units
        self._outbound = outbound
        self._email = email or EmailTarget(settings)
        self._rabbitmq = rabbitmq or RabbitTarget(None)
        self._webpush = webpush
        self._tracing = tracing or Tracing()
        self._settings = settings
        self._metrics = metrics
        self._queue: deque[tuple[str, int]] = deque()
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._started = False
        self._inflight: set[asyncio.Task[None]] = set()
        self._definitions: dict[DefinitionKey, tuple[float, DeliveryDefinition | None]] = {}
        """By (tenant, name): a delivery only ever uses its own tenant's definition."""

    def kick(self, expected: Iterable[tuple[str, int]]) -> None:
        """Send these (delivery id, current attempt) at once; called after their commit.

        Beyond `inline_queue` waiting entries the dispatcher sends them instead (counted).
        """
        for entry in expected:
            if len(self._queue) >= self._settings.inline_queue:
                self._metrics.inline_overflow_total.inc()
                continue
            self._queue.append(entry)
        self._start_batches()

    def start(self) -> None:
        self._started = True
        self._start_batches()

    async def stop(self) -> None:
        """Cancel the at-once work; anything it held is re-sent by a dispatcher later."""
        self._started = False
        tasks = list(self._inflight)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._outbound.aclose()
        await self._email.aclose()
        await self._rabbitmq.aclose()

    def _start_batches(self) -> None:
        """Up to INLINE_BATCHES batches in flight; what piles up meanwhile forms the next.

        Started right here, not by a draining task: the claim goes out on the event
        loop's next turn after the commit.
        """
        while self._started and self._queue and len(self._inflight) < INLINE_BATCHES:
            size = min(len(self._queue), INLINE_BATCH)
            batch = [self._queue.popleft() for _ in range(size)]
            task = asyncio.create_task(self._inline_batch(batch))
            self._inflight.add(task)
            task.add_done_callback(self._batch_done)

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        self._start_batches()

    async def _inline_batch(self, batch: list[tuple[str, int]]) -> None:
        try:
            await self.attempt_exact(batch)
        except Exception:
            log.exception("at-once send of %d deliveries failed", len(batch))

    async def attempt_exact(self, expected: Sequence[tuple[str, int]]) -> int:
        """Claim exactly these attempts (where still current), send, settle; how many sent."""
        async with self._units(autocommit=True) as unit:
            session = unit.session
            claimed = await repo.claim_exact(session, expected, self._settings.lease_s)
        return await self._process(claimed)

    async def attempt_due(self, limit: int) -> int:
        """Claim up to `limit` due deliveries, send, settle; how many were attempted."""
        return await self._process(await self._claim_due(limit))

    async def drain_due(self, limit: int) -> int:
        """Claim, send and settle every due delivery, `limit` at a time, with up to
        PIPELINED batches in flight; how many were attempted."""
        attempted = 0
        sending: set[asyncio.Task[int]] = set()
        try:
            while True:
                claimed = await self._claim_due(limit)
                attempted += len(claimed)
                if claimed:
                    sending.add(asyncio.create_task(self._process(claimed)))
                if len(claimed) < limit:
                    break
                if len(sending) >= PIPELINED:
                    done, sending = await asyncio.wait(sending, return_when=FIRST_COMPLETED)
                    for task in done:
                        task.result()  # a failed settlement is loud
            await asyncio.gather(*sending)
        finally:
            for task in sending:  # only after a failure: what was claimed is re-sent
                task.cancel()  # after its lease
            await asyncio.gather(*sending, return_exceptions=True)
        return attempted

    async def _claim_due(self, limit: int) -> list[Claimed]:
        async with self._units(autocommit=True) as unit:
            session = unit.session
            return await repo.claim_due(session, limit, self._settings.lease_s)

    async def _process(self, claimed: list[Claimed]) -> int:
        if not claimed:
            return 0
        found = await self._definitions_of({c.definition_key for c in claimed})
        if len(claimed) == 1:  # the idle path: no task for gather to wrap it in
            outcomes = [await self._attempt(claimed[0], found.get(claimed[0].definition_key))]
        else:
            sends = (self._attempt(c, found.get(c.definition_key)) for c in claimed)
            outcomes = list(await asyncio.gather(*sends))
        jitter = self._settings.jitter
        settlements = [
            plan(c, found.get(c.definition_key), o, jitter)
            for c, o in zip(claimed, outcomes, strict=True)
        ]
        async with self._units(autocommit=True) as unit:
            session = unit.session
            landed = await repo.settle(session, settlements)
        for c, s in zip(claimed, settlements, strict=True):
            if s.id in landed:
                self._metrics.settled_total.labels(status=s.status).inc()
            if s.disable_definition:
                self._definitions.pop(c.definition_key, None)
        return len(claimed)

    def _fresh(self, key: DefinitionKey, now: float) -> bool:
        """Only enabled definitions are cached: a disabled one is asked for again."""
        cached = self._definitions.get(key)
        if cached is None or cached[1] is None or cached[1].disabled_at is not None:
            return False
        return now - cached[0] <= DEFINITION_TTL_S

    async def _definitions_of(
        self, keys: set[DefinitionKey]
    ) -> dict[DefinitionKey, DeliveryDefinition]:
        """Definitions by (tenant, name), cached for DEFINITION_TTL_S (a PUT is seen within
        it)."""
        now = time.monotonic()
        cache = self._definitions
        stale = {k for k in keys if not self._fresh(k, now)}
        if stale:
            async with self._units(autocommit=True) as unit:
                session = unit.session
                fresh = await repo.definitions(session, stale)
            cache.update((key, (now, fresh.get(key))) for key in stale)
        return {k: row for k in keys if (row := cache[k][1]) is not None}

    async def _attempt(self, claimed: Claimed, definition: DeliveryDefinition | None) -> Outcome:
        """`_send`; tracing on, as a `notifyhub.delivery.attempt` span."""
        if not self._tracing.enabled:
            return await self._send(claimed, definition)
        attributes: Attributes = {
            "notifyhub.tenant": claimed.tenant,
            "notifyhub.delivery.id": claimed.id,
            "notifyhub.delivery.definition": claimed.definition,
            "notifyhub.delivery.attempt": claimed.attempt,
        }
        with self._tracing.span("notifyhub.delivery.attempt", attributes, kind="client") as span:
            outcome = await self._send(claimed, definition)
            if outcome.status_code is not None:
                span.set_attribute("http.response.status_code", outcome.status_code)
            if outcome.error is not None:
                span.set_attribute("notifyhub.delivery.error", outcome.error)
        return outcome

    async def _send(self, claimed: Claimed, definition: DeliveryDefinition | None) -> Outcome:
        if definition is None:
            return Outcome(None, f"no delivery definition {claimed.definition!r}", 0.0)
        if definition.disabled_at is not None:
            return Outcome(None, "definition disabled (a receiver answered 410 Gone)", 0.0)
        if out_of_retries(claimed, definition):
            error = f"not confirmed within {definition.max_confirm_delay_s}s; no retries left"
            return Outcome(None, error, 0.0, attempted=False)
        async with self._slots:
            outcome = await self._caught(claimed, definition)
        self._metrics.attempt_seconds.observe(outcome.duration_s)
        return outcome

    async def _caught(self, claimed: Claimed, definition: DeliveryDefinition) -> Outcome:
        """`_by_kind`, an error no adapter expected (a bug, a payload it cannot take) made a
        failed attempt of this delivery alone: raised, it lost every settlement of the
        batch, whose deliveries were sent again after the lease, and again."""
        started = time.monotonic()
        try:
            return await self._by_kind(claimed, definition)
        except Exception as exc:
            log.exception("delivery %s: its %s attempt failed", claimed.id, definition.kind)
            error = f"internal error: {type(exc).__name__}: {exc}"[:500]
            return Outcome(None, error, time.monotonic() - started)

    async def _by_kind(self, claimed: Claimed, definition: DeliveryDefinition) -> Outcome:
        """The definition's target adapter; every kind's attempt ends within the
        definition's `timeout_s` (capped by `max_timeout_s`, below the lease)."""
        timeout_s = min(definition.timeout_s, self._settings.max_timeout_s)
        c = claimed
        if definition.kind == "email":
            return await self._email.send(c.id, definition.email or {}, c.payload, timeout_s)
        if definition.kind == "rabbitmq":
            target = definition.rabbitmq or {}
            return await self._rabbitmq.send(
                c.id, c.tenant, c.definition, target, c.payload, timeout_s
            )
        if definition.kind == "webpush":
            if self._webpush is None:
                return Outcome(None, "Web Push is not set up in this process", 0.0)
            return await self._webpush.send(c.tenant, c.payload, timeout_s)
        return await self._post(claimed, definition)

    async def _post(self, claimed: Claimed, definition: DeliveryDefinition) -> Outcome:
        """A webhook attempt: the payload POSTed, signed (Standard Webhooks)."""
        body = orjson.dumps(claimed.payload)
        secrets_ = [s for s in (definition.secret, definition.previous_secret) if s]
        headers = signing.headers(secrets_, claimed.id, int(time.time()), body)
        timeout_s = min(definition.timeout_s, self._settings.max_timeout_s)
        return await self._outbound.post(definition.url, body, headers, timeout_s)
