"""The outbox's guarantees on real PostgreSQL: races, crashes mid-send, library mode."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import Delivery, DeliveryAlert, DeliveryAttempt, DeliveryDefinition
from notifyhub.db.repositories import deliveries as repo
from notifyhub.db.repositories.deliveries import Settlement
from notifyhub.db.unit import UnitOfWork, units
from notifyhub.delivery_metrics import DeliveryMetrics
from notifyhub.errors import Conflict, InvalidInput
from notifyhub.services.deliveries import DeliveryService, enqueue
from notifyhub.services.outbound import AddressGuard, Outbound
from notifyhub.services.sender import DeliverySender
from notifyhub.services.targets import TargetCheck
from notifyhub.settings import DeliverySettings
from support.deliveries import unique, webhook_spec
from support.receiver import Receiver, Reply

Maker = async_sessionmaker[AsyncSession]
LOCAL = TargetCheck(AddressGuard(allow=["127.0.0.1/32"]))
"""The local receivers' address is allowed, as in every test hub's settings."""


@contextlib.asynccontextmanager
async def a_sender(
    sessionmaker: Maker, lease_s: float = 5, kind: type[DeliverySender] = DeliverySender
) -> AsyncIterator[DeliverySender]:
    """A sender as one hub process would have it (its own HTTP client and metrics)."""
    settings = DeliverySettings(
        allow_networks=["127.0.0.1/32"], lease_s=lease_s, max_timeout_s=lease_s / 2, jitter=0.0
    )
    guard = AddressGuard(False, settings.allow_networks)
    outbound = Outbound(guard, settings.response_cap_bytes, settings.concurrency)
    metrics = DeliveryMetrics(CollectorRegistry())
    sender = kind(units(sessionmaker), outbound, settings, metrics)
    sender.start()
    try:
        yield sender
    finally:
        await sender.stop()


class NoKicks:
    def kick(self, expected: Iterable[tuple[str, int]]) -> None:
        raise AssertionError("nothing to kick")


async def _definition(sessionmaker: Maker, url: str) -> str:
    name = unique("outbox")
    spec = webhook_spec(url, timeout_s=30, max_retries=-1)
    async with sessionmaker.begin() as session:
        await DeliveryService(NoKicks(), LOCAL).put_definition(
            session, "default", name, spec, False, False
        )
    return name


async def _attempts(sessionmaker: Maker, delivery_ids: list[str]) -> dict[str, int]:
    async with sessionmaker() as session:
        rows = await session.execute(
            select(DeliveryAttempt.delivery_id, func.count())
            .where(DeliveryAttempt.delivery_id.in_(delivery_ids))
            .group_by(DeliveryAttempt.delivery_id)
        )
    return {str(i): int(n) for i, n in rows.all()}


@pytest.mark.slow
async def test_inline_sender_and_dispatcher_racing_settle_each_attempt_once(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """1000 deliveries, each raced by an at-once send and a dispatcher claim, each from
    its own PostgreSQL session: every one is sent once and settled once."""
    name = await _definition(sessionmaker, receiver.url("/race"))
    ids: list[str] = []
    wins = {"inline": 0, "dispatcher": 0}
    async with a_sender(sessionmaker) as inline, a_sender(sessionmaker) as dispatcher:
        for i in range(1000):
            async with UnitOfWork(sessionmaker) as unit:
                ids.append(await enqueue(unit, name, {"i": i}))
            by_inline, by_dispatcher = await asyncio.gather(
                inline.attempt_exact([(ids[-1], 0)]), dispatcher.attempt_due(10)
            )
            wins["inline"] += by_inline
            wins["dispatcher"] += by_dispatcher and not by_inline

    arrived = [r.headers["webhook-id"] for r in receiver.at("/race")]
    assert sorted(arrived) == sorted(ids), "each delivery sent exactly once"
    assert set((await _attempts(sessionmaker, ids)).values()) == {1}
    async with sessionmaker() as session:
        statuses = await session.scalars(select(Delivery.status).where(Delivery.id.in_(ids)))
        assert set(statuses) == {"sent"}
    assert wins["inline"] + wins["dispatcher"] >= 1000
    print("race winners:", wins)


async def test_a_dispatcher_killed_mid_send_is_redelivered_with_the_same_webhook_id(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    name = await _definition(sessionmaker, receiver.url("/crash"))
    receiver.plan("/crash", Reply(200, delay_s=60))  # the first receipt hangs
    async with UnitOfWork(sessionmaker) as unit:
        delivery_id = await enqueue(unit, name, {"n": 1})

    async with a_sender(sessionmaker, lease_s=1) as doomed:
        sending = asyncio.create_task(doomed.attempt_exact([(delivery_id, 0)]))
        await receiver.wait_for("/crash", 1)
        sending.cancel()  # the process dies mid-request: no settlement
        with contextlib.suppress(asyncio.CancelledError):
            await sending

    async with a_sender(sessionmaker) as fresh, asyncio.timeout(20):
        while len(receiver.at("/crash")) < 2:  # nothing is due until the lease ends
            await fresh.attempt_due(10)
            await asyncio.sleep(0.1)
        await fresh.attempt_due(10)

    first, second = receiver.at("/crash")[:2]
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery_id
    assert first.body == second.body
    async with sessionmaker() as session:
        row = await session.get(Delivery, delivery_id)
        assert row is not None and row.status == "sent"


async def test_an_attempt_that_raises_fails_alone_and_its_batch_is_settled(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """An adapter that raises where no one expected it (a bug, a payload it cannot take)
    fails its own delivery's attempt. Before, the error left the whole batch unsettled:
    deliveries the receiver had taken were sent again after every lease, for good."""
    name = await _definition(sessionmaker, receiver.url("/batch"))
    async with UnitOfWork(sessionmaker) as unit:
        ids = [await enqueue(unit, name, {"i": i}) for i in range(4)]
    doomed = ids[1]

    class Buggy(DeliverySender):
        async def _by_kind(self, claimed: Any, definition: Any) -> Any:
            if claimed.id == doomed:
                raise TypeError("an adapter's bug")
            return await super()._by_kind(claimed, definition)

    async with a_sender(sessionmaker, kind=Buggy) as sender:
        assert await sender.attempt_exact([(i, 0) for i in ids]) == 4  # one batch
        assert await sender.attempt_exact([(i, 0) for i in ids]) == 0  # each settled once

    assert sorted(r.headers["webhook-id"] for r in receiver.at("/batch")) == sorted(
        i for i in ids if i != doomed
    )
    async with sessionmaker() as session:
        rows = {i: await session.get(Delivery, i) for i in ids}
        errors = await session.scalars(
            select(DeliveryAttempt.error).where(DeliveryAttempt.delivery_id == doomed)
        )
        assert list(errors) == ["internal error: TypeError: an adapter's bug"]
    assert {i: row.status for i, row in rows.items() if row is not None} == {
        i: "failed" if i == doomed else "sent" for i in ids
    }


@pytest.mark.slow  # waits out a slow receipt
async def test_draining_claims_the_next_batch_while_a_slow_send_of_the_last_one_runs(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """Batches of one: the first receipt hangs 4 s; the other three are claimed, sent
    and answered meanwhile (one batch at a time, they waited for it)."""
    name = await _definition(sessionmaker, receiver.url("/slow"))
    receiver.plan("/slow", Reply(200, delay_s=4))
    async with UnitOfWork(sessionmaker) as unit:
        ids = [await enqueue(unit, name, {"i": i}) for i in range(4)]

    async with a_sender(sessionmaker, lease_s=10) as sender:
        draining = asyncio.create_task(sender.drain_due(1))
        arrived = await receiver.wait_for("/slow", 4, timeout_s=2)
        assert await draining >= 4

    assert sorted(r.headers["webhook-id"] for r in arrived) == sorted(ids)
    assert set((await _attempts(sessionmaker, ids)).values()) == {1}


@dataclass
class Recorder:
    kicked: list[tuple[str, int]]
    kicks: int = 0

    def kick(self, expected: Iterable[tuple[str, int]]) -> None:
        self.kicked.extend(expected)
        self.kicks += 1


class RolledBack(Exception):
    """Raised inside a unit of work to roll it back."""


async def test_library_mode_sends_after_commit_and_never_for_a_rollback(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    name = await _definition(sessionmaker, receiver.url("/library"))
    recorder = Recorder([])

    with contextlib.suppress(RolledBack):
        async with UnitOfWork(sessionmaker) as unit:
            rolled_back = await enqueue(unit, name, {"order": 1}, sender=recorder)
            assert recorder.kicked == []  # not before the commit
            raise RolledBack
    async with UnitOfWork(sessionmaker) as unit:
        committed = await enqueue(unit, name, {"order": 2}, sender=recorder)
        again = await enqueue(unit, name, {"order": 2.5}, sender=recorder)
        assert recorder.kicked == []
    assert recorder.kicked == [(committed, 0), (again, 0)]
    assert recorder.kicks == 1  # one kick per unit, however many it added

    async with a_sender(sessionmaker) as sender:
        async with UnitOfWork(sessionmaker) as unit:  # real at-once send after commit
            at_once = await enqueue(unit, name, {"order": 3}, sender=sender)
        await receiver.wait_for("/library", 1)
        for _ in range(3):
            await sender.attempt_due(100)

    arrived = {r.headers["webhook-id"] for r in receiver.at("/library")}
    assert arrived == {committed, again, at_once}
    assert rolled_back not in arrived
    async with sessionmaker() as session:
        assert await session.get(Delivery, rolled_back) is None


async def test_enqueue_refuses_unknown_and_disabled_definitions_and_adds_nothing(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """The definition's check is folded into the INSERT; the caller's transaction goes on."""
    name = await _definition(sessionmaker, receiver.url("/refused"))
    async with sessionmaker.begin() as session:
        await session.execute(
            update(DeliveryDefinition)
            .where(DeliveryDefinition.name == name)
            .values(disabled_at=func.now())
        )
    recorder = Recorder([])
    async with UnitOfWork(sessionmaker) as unit:
        with pytest.raises(InvalidInput):
            await enqueue(unit, unique("missing"), {"n": 1}, sender=recorder)
        with pytest.raises(Conflict):
            await enqueue(unit, name, {"n": 2}, sender=recorder)
        # still usable: the refusals did not abort the caller's transaction
        counted = await unit.session.execute(select(func.count()).select_from(Delivery))
        assert counted.scalar_one() >= 0
    assert recorder.kicked == []
    async with sessionmaker() as session:
        found = await session.scalars(select(Delivery).where(Delivery.definition == name))
        assert list(found) == []


async def test_create_commits_before_it_returns_then_sends_at_once(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """The HTTP path's 202 follows a commit: when `create` returns, the row is there for
    any session, and its attempt 0 was handed to the sender."""
    name = await _definition(sessionmaker, receiver.url("/create"))
    recorder = Recorder([])
    service = DeliveryService(recorder, LOCAL)
    async with UnitOfWork(sessionmaker, autocommit=True) as unit:
        delivery_id = await service.create(unit, "default", name, {"n": 1}, "test")
        async with sessionmaker() as session:  # committed by the INSERT itself
            assert await session.get(Delivery, delivery_id) is not None
        assert recorder.kicked == []
    assert recorder.kicked == [(delivery_id, 0)]
    async with sessionmaker() as session:
        row = await session.get(Delivery, delivery_id)
        assert row is not None and row.status == "pending" and row.attempt == 0
    with pytest.raises(InvalidInput):
        async with UnitOfWork(sessionmaker, autocommit=True) as unit:
            await service.create(unit, "default", unique("missing"), {"n": 2}, None)
    assert recorder.kicked == [(delivery_id, 0)]


async def test_only_a_current_settlement_records_its_attempt_alerts_and_410(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """Settling is one statement: its attempt row, owed alerts and a 410's disabling are
    written for the rows its fenced UPDATE changed, and for no other."""
    name = await _definition(sessionmaker, receiver.url("/settle"))
    async with UnitOfWork(sessionmaker) as unit:
        delivery_id = await enqueue(unit, name, {"n": 1})
    async with UnitOfWork(sessionmaker, autocommit=True) as unit:
        session = unit.session
        [claimed] = await repo.claim_exact(session, [(delivery_id, 0)], 60)

    def gone(attempt: int) -> Settlement:
        return Settlement(
            id=delivery_id,
            attempt=attempt,
            status="final_failed",
            failures=1,
            delay_s=0.0,
            error="HTTP 410",
            status_code=410,
            duration_ms=1.5,
            alert_channels=("email", "webhook"),
            definition=name,
            disable_definition=True,
        )

    async def recorded() -> tuple[list[int], list[str], bool]:
        async with sessionmaker() as session:
            attempts = await session.scalars(
                select(DeliveryAttempt.attempt).where(DeliveryAttempt.delivery_id == delivery_id)
            )
            alerts = await session.scalars(
                select(DeliveryAlert.channel).where(DeliveryAlert.delivery_id == delivery_id)
            )
            definition = await session.get(DeliveryDefinition, {"tenant": "default", "name": name})
            assert definition is not None
            return list(attempts), sorted(alerts), definition.disabled_at is not None

    async with UnitOfWork(sessionmaker, autocommit=True) as unit:
        session = unit.session
        assert await repo.settle(session, [gone(claimed.attempt - 1)]) == set()
    assert await recorded() == ([], [], False)
    async with UnitOfWork(sessionmaker, autocommit=True) as unit:
        session = unit.session
        assert await repo.settle(session, [gone(claimed.attempt)]) == {delivery_id}
    assert await recorded() == ([claimed.attempt], ["email", "webhook"], True)
