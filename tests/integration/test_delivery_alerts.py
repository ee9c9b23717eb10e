"""Alerts that cannot be sent: tried again after doubling waits, then given up, never
claimed forever. A real alert webhook (the local receiver) and real PostgreSQL."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from datetime import datetime

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from ulid import ULID

from notifyhub.db.models import DeliveryAlert
from notifyhub.db.unit import units
from notifyhub.delivery_metrics import DeliveryMetrics
from notifyhub.domain.delivery import AlertTrigger
from notifyhub.services.alerts import AlertSender
from notifyhub.services.deliveries import DeliveryService
from notifyhub.services.outbound import AddressGuard, Outbound
from notifyhub.services.targets import TargetCheck
from notifyhub.settings import DeliverySettings
from support.deliveries import unique, webhook_spec
from support.receiver import Receiver, Reply

Maker = async_sessionmaker[AsyncSession]
LOCAL = TargetCheck(AddressGuard(allow=["127.0.0.1/32"]))


class Kicks:
    def kick(self, expected: object) -> None:
        pass


@contextlib.asynccontextmanager
async def _sender(
    sessionmaker: Maker, **settings: float
) -> AsyncIterator[tuple[AlertSender, DeliveryMetrics]]:
    """An alert sender as a hub's dispatcher has it, with its own HTTP client and metrics."""
    s = DeliverySettings(allow_networks=["127.0.0.1/32"], lease_s=5, max_timeout_s=2, **settings)
    outbound = Outbound(AddressGuard(False, s.allow_networks), s.response_cap_bytes, 4)
    metrics = DeliveryMetrics(CollectorRegistry())
    try:
        yield AlertSender(units(sessionmaker), outbound, s, metrics), metrics
    finally:
        await outbound.aclose()


async def _definition(sessionmaker: Maker, alert_url: str | None, emails: list[str]) -> str:
    name = unique("alerting")
    spec = webhook_spec(
        "http://127.0.0.1:9/never-called",
        timeout_s=1,
        max_retries=0,
        alert_trigger=AlertTrigger.FINAL_FAILURE,
        alert_emails=emails,
        alert_webhook_url=alert_url,
    )
    async with sessionmaker.begin() as session:
        await DeliveryService(Kicks(), LOCAL).put_definition(
            session, "default", name, spec, False, False
        )
    return name


async def _owe(sessionmaker: Maker, definition: str, channel: str = "webhook") -> str:
    """An alert owed for a delivery's final failure, as a settlement writes it."""
    delivery_id = str(ULID())
    async with sessionmaker.begin() as session:
        session.add(
            DeliveryAlert(
                delivery_id=delivery_id,
                attempt=1,
                channel=channel,
                definition=definition,
                tenant="default",
                failures=1,
                final=True,
                error="HTTP 500",
            )
        )
    return delivery_id


async def _row(sessionmaker: Maker, delivery_id: str) -> DeliveryAlert:
    async with sessionmaker() as session:
        row = await session.scalar(
            select(DeliveryAlert).where(DeliveryAlert.delivery_id == delivery_id)
        )
    assert row is not None
    return row


async def _due_now(sessionmaker: Maker, delivery_id: str) -> None:
    """Skip the wait before its next try."""
    async with sessionmaker.begin() as session:
        await session.execute(
            update(DeliveryAlert)
            .where(DeliveryAlert.delivery_id == delivery_id)
            .values(due_at=func.clock_timestamp())
        )


async def _tick_until(sender: AlertSender, sessionmaker: Maker, delivery_id: str) -> None:
    """Run the sender until it has claimed the alert once more (the shared test database
    may owe other tests' alerts too, claimed in due order)."""
    before = (await _row(sessionmaker, delivery_id)).claims
    for _ in range(20):
        await sender.run_once()
        if (await _row(sessionmaker, delivery_id)).claims > before:
            return
    raise AssertionError(f"alert of {delivery_id} not claimed again")


def _mine(receiver: Receiver, path: str, delivery_id: str) -> int:
    return sum(json.loads(r.body)["delivery_id"] == delivery_id for r in receiver.at(path))


async def test_a_refused_alert_waits_doubling_between_tries_then_is_given_up(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    path = f"/{unique('refusing')}"
    receiver.plan(path, default=Reply(500))
    delivery_id = await _owe(sessionmaker, await _definition(sessionmaker, receiver.url(path), []))
    async with _sender(sessionmaker, alert_tries=3, alert_retry_s=60) as (sender, metrics):
        waits = await _three_refused_tries(sender, sessionmaker, receiver, path, delivery_id)
        row = await _row(sessionmaker, delivery_id)
        assert waits[:2] == [60, 120]  # the third try's failure gave it up
        assert row.given_up_at is not None and row.sent_at is None
        await _due_now(sessionmaker, delivery_id)
        for _ in range(3):  # never claimed again
            await sender.run_once()
    assert (await _row(sessionmaker, delivery_id)).claims == 3
    assert _mine(receiver, path, delivery_id) == 3
    assert metrics.alerts_given_up_total.labels(channel="webhook")._value.get() >= 1


async def _three_refused_tries(
    sender: AlertSender, sessionmaker: Maker, receiver: Receiver, path: str, delivery_id: str
) -> list[int]:
    """Each try's wait until the alert is due again (s), each waited out at once."""
    waits = []
    for tries in (1, 2, 3):
        await _tick_until(sender, sessionmaker, delivery_id)
        row = await _row(sessionmaker, delivery_id)
        assert (row.claims, _mine(receiver, path, delivery_id)) == (tries, tries)
        async with sessionmaker() as session:
            now: datetime = await session.scalar(select(func.clock_timestamp()))
        waits.append(round((row.due_at - now).total_seconds()))
        for _ in range(3):  # not due again before its wait
            await sender.run_once()
        assert _mine(receiver, path, delivery_id) == tries
        if tries < 3:
            assert row.given_up_at is None
            await _due_now(sessionmaker, delivery_id)
    return waits


async def test_an_alert_sent_on_a_later_try_is_marked_sent(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    path = f"/{unique('flaky')}"
    receiver.plan(path, Reply(503))
    delivery_id = await _owe(sessionmaker, await _definition(sessionmaker, receiver.url(path), []))

    async with _sender(sessionmaker, alert_tries=3, alert_retry_s=60) as (sender, _):
        await _tick_until(sender, sessionmaker, delivery_id)
        await _due_now(sessionmaker, delivery_id)
        await _tick_until(sender, sessionmaker, delivery_id)

    row = await _row(sessionmaker, delivery_id)
    assert row.sent_at is not None and row.given_up_at is None
    assert _mine(receiver, path, delivery_id) == 2


@pytest.mark.parametrize("channel", ["webhook", "email"])
async def test_an_alert_whose_definition_lost_its_addresses_is_given_up_unsent(
    sessionmaker: Maker, receiver: Receiver, channel: str
) -> None:
    """A `PUT` took the alert's addresses away after it was owed: nobody is left to tell
    (before, a webhook alert failed an assertion in every dispatcher tick)."""
    delivery_id = await _owe(sessionmaker, await _definition(sessionmaker, None, []), channel)

    async with _sender(sessionmaker) as (sender, metrics):
        await _tick_until(sender, sessionmaker, delivery_id)

    row = await _row(sessionmaker, delivery_id)
    assert row.given_up_at is not None and row.sent_at is None
    assert metrics.alerts_given_up_total.labels(channel=channel)._value.get() >= 1


async def test_an_alert_of_a_deleted_definition_is_given_up_unsent(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    delivery_id = await _owe(sessionmaker, unique("deleted"))

    async with _sender(sessionmaker) as (sender, _):
        await _tick_until(sender, sessionmaker, delivery_id)

    row = await _row(sessionmaker, delivery_id)
    assert row.given_up_at is not None and row.sent_at is None
