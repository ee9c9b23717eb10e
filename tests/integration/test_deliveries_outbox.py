"""The outbox's guarantees on real PostgreSQL: races, crashes mid-send, library mode."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
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
from notifyhub.domain.delivery import AlertTrigger
from notifyhub.errors import Conflict, InvalidInput
from notifyhub.services.deliveries import DeliveryService, enqueue
from notifyhub.services.outbound import AddressGuard, Outbound
from notifyhub.services.sender import DeliverySender
from notifyhub.services.targets import TargetCheck
from notifyhub.settings import DeliverySettings
from support.deliveries import unique, webhook_spec
from support.receiver import Received, Receiver, Reply

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


async def _definition(sessionmaker: Maker, url: str, **changes: Any) -> str:
    name = unique("outbox")
    spec = webhook_spec(url, **({"timeout_s": 30, "max_retries": -1} | changes))
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


def _confirmer(sessionmaker: Maker, answers: list[str]) -> Callable[[Received], Awaitable[None]]:
    """A receiver's handler step: confirm the delivery it holds before answering (as
    `POST .../confirm` does), noting the status it got or the 409's detail."""

    async def confirm(request: Received) -> None:
        answers.append(await _confirm(sessionmaker, request.headers["webhook-id"]))

    return confirm


async def _confirm(sessionmaker: Maker, delivery_id: str) -> str:
    try:
        async with sessionmaker.begin() as session:
            found = await DeliveryService(NoKicks(), LOCAL).confirm(session, "default", delivery_id)
    except Conflict as exc:
        return f"409 {exc}"
    return str(found["status"])


async def _shown(sessionmaker: Maker, delivery_id: str) -> Any:
    """The delivery as `GET /v1/deliveries/{id}` shows it."""
    async with sessionmaker() as session:
        return await DeliveryService(NoKicks(), LOCAL).get(session, "default", delivery_id)


async def _token(sessionmaker: Maker, delivery_id: str) -> int:
    """The delivery's fencing token now: what the dispatcher's claim of it expects."""
    async with sessionmaker() as session:
        row = await session.get(Delivery, delivery_id, populate_existing=True)
        assert row is not None
        return row.attempt


def _listed(shown: Any) -> list[tuple[int, int | None]]:
    return [(a["attempt"], a["status_code"]) for a in shown["attempts"]]


async def test_a_confirm_during_a_resend_keeps_that_attempt_listed(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """Attempt 1 is not confirmed in time; the receiver confirms attempt 2 from inside
    its handler. The confirm bumped the token, so attempt 2's settlement was dropped:
    `sent` with one attempt listed, two received. Now both are listed, in order."""
    answers: list[str] = []
    name = await _definition(
        sessionmaker, receiver.url("/resend"), need_confirm=True, max_confirm_delay_s=60
    )
    receiver.plan("/resend", Reply(200), Reply(200, before=_confirmer(sessionmaker, answers)))
    async with UnitOfWork(sessionmaker) as unit:
        delivery_id = await enqueue(unit, name, {"n": 1})

    async with a_sender(sessionmaker) as sender:
        assert await sender.attempt_exact([(delivery_id, 0)]) == 1
        assert (await _shown(sessionmaker, delivery_id))["status"] == "awaiting_confirm"
        # its confirm delay ran out: the dispatcher's claim, as the row's token expects it
        token = await _token(sessionmaker, delivery_id)
        assert await sender.attempt_exact([(delivery_id, token)]) == 1
        assert await sender.attempt_exact([(delivery_id, token + 1)]) == 0  # nothing open

    shown = await _shown(sessionmaker, delivery_id)
    assert answers == ["sent"]
    assert shown["status"] == "sent"
    assert _listed(shown) == [(1, 200), (2, 200)]
    assert len(receiver.at("/resend")) == 2


async def test_a_confirm_mid_attempt_stands_whatever_the_receiver_answers(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """The receiver confirms, then answers 500: it has the message (that is what the
    confirm says), so the delivery stays `sent`, owes no alert, and lists the 500."""
    answers: list[str] = []
    name = await _definition(
        sessionmaker,
        receiver.url("/confirm-500"),
        need_confirm=True,
        alert_trigger=AlertTrigger.EVERY_FAILURE,
        alert_webhook_url=receiver.url("/alerts"),
    )
    receiver.plan("/confirm-500", Reply(500, before=_confirmer(sessionmaker, answers)))
    async with UnitOfWork(sessionmaker) as unit:
        delivery_id = await enqueue(unit, name, {"n": 1})

    async with a_sender(sessionmaker) as sender:
        assert await sender.attempt_exact([(delivery_id, 0)]) == 1

    shown = await _shown(sessionmaker, delivery_id)
    assert answers == ["sent"]
    assert (shown["status"], shown["failures"], shown["last_error"]) == ("sent", 0, None)
    assert _listed(shown) == [(1, 500)]
    async with sessionmaker() as session:
        alerts = await session.scalars(
            select(DeliveryAlert.id).where(DeliveryAlert.delivery_id == delivery_id)
        )
        assert list(alerts) == []


async def test_a_confirm_with_no_attempt_under_way_or_no_need_confirm_is_refused(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """409 for a delivery that failed and waits for its retry (nothing the receiver holds
    now), and for one whose definition asks for no confirmation (even mid-attempt); the
    retry's receiver confirming from its handler then ends the first one `sent`."""
    answers: list[str] = []
    confirming = await _definition(
        sessionmaker, receiver.url("/later"), need_confirm=True, max_confirm_delay_s=60
    )
    plain = await _definition(sessionmaker, receiver.url("/plain"))
    receiver.plan("/later", Reply(500), Reply(200, before=_confirmer(sessionmaker, answers)))
    receiver.plan("/plain", Reply(200, before=_confirmer(sessionmaker, answers)))
    async with UnitOfWork(sessionmaker) as unit:
        later = await enqueue(unit, confirming, {"n": 1})
        unconfirmed = await enqueue(unit, plain, {"n": 2})

    async with a_sender(sessionmaker) as sender:
        assert await sender.attempt_exact([(later, 0), (unconfirmed, 0)]) == 2
        assert (await _shown(sessionmaker, later))["status"] == "failed"
        refused = await _confirm(sessionmaker, later)
        assert await sender.attempt_exact([(later, await _token(sessionmaker, later))]) == 1

    assert refused.startswith(f"409 delivery {later} is failed"), refused
    [plain_answer, retry_answer] = answers
    assert "need_confirm" in plain_answer and plain_answer.startswith("409"), plain_answer
    assert retry_answer == "sent"
    shown = await _shown(sessionmaker, later)
    assert (shown["status"], _listed(shown)) == ("sent", [(1, 500), (2, 200)])
    shown = await _shown(sessionmaker, unconfirmed)
    assert (shown["status"], _listed(shown)) == ("sent", [(1, 200)])


async def test_a_confirm_fences_nothing_and_only_the_current_attempt_settles(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """Races, step by step on real sessions: a claim whose lease ran out (its hub died
    mid-send) is not under way, so a confirm then is a 409; a confirm while the next claim
    is under way lands; the dead claim's late settlement is still fenced out, and the
    current one's is listed without undoing the confirm."""
    name = await _definition(
        sessionmaker, receiver.url("/fenced"), need_confirm=True, max_confirm_delay_s=60
    )
    async with UnitOfWork(sessionmaker) as unit:
        delivery_id = await enqueue(unit, name, {"n": 1})

    def ok(attempt: int) -> Settlement:
        return Settlement(
            id=delivery_id,
            attempt=attempt,
            status="awaiting_confirm",
            failures=0,
            delay_s=60.0,
            error=None,
            status_code=200,
            duration_ms=1.0,
            definition=name,
        )

    async with UnitOfWork(sessionmaker, autocommit=True) as unit:
        [dead] = await repo.claim_exact(unit.session, [(delivery_id, 0)], 0)  # lease over
    assert (await _confirm(sessionmaker, delivery_id)).startswith("409")
    async with UnitOfWork(sessionmaker, autocommit=True) as unit:
        [live] = await repo.claim_exact(unit.session, [(delivery_id, dead.attempt)], 60)
    assert await _confirm(sessionmaker, delivery_id) == "sent"
    async with UnitOfWork(sessionmaker, autocommit=True) as unit:
        assert await repo.settle(unit.session, [ok(dead.attempt)]) == set()
        assert await repo.settle(unit.session, [ok(live.attempt)]) == {delivery_id}
        assert await repo.claim_exact(unit.session, [(delivery_id, live.attempt)], 60) == []

    shown = await _shown(sessionmaker, delivery_id)
    assert (shown["status"], _listed(shown)) == ("sent", [(1, 200)])
    assert shown["last_attempt_at"] is not None and shown["finished_at"] is not None


async def test_an_unconfirmed_delivery_out_of_retries_lists_only_the_attempts_made(
    sessionmaker: Maker, receiver: Receiver
) -> None:
    """Two attempts answered 200, neither confirmed, no retry left: the third claim fails
    the delivery without a send. It was listed as a third attempt (no status, "no retries
    left"); now the reason is the delivery's last error, its final alert is still owed,
    and the last attempt is the last one made."""
    name = await _definition(
        sessionmaker,
        receiver.url("/unconfirmed"),
        need_confirm=True,
        max_confirm_delay_s=2,
        max_retries=1,
        alert_trigger=AlertTrigger.FINAL_FAILURE,
        alert_webhook_url=receiver.url("/alerts"),
    )
    async with UnitOfWork(sessionmaker) as unit:
        delivery_id = await enqueue(unit, name, {"n": 1})

    async with a_sender(sessionmaker) as sender:
        for _ in range(2):  # the first attempt, then a re-send once its delay ran out
            assert (
                await sender.attempt_exact([(delivery_id, await _token(sessionmaker, delivery_id))])
                == 1
            )
        sent = await _shown(sessionmaker, delivery_id)
        token = await _token(sessionmaker, delivery_id)
        assert await sender.attempt_exact([(delivery_id, token)]) == 1  # out of retries
        assert await sender.attempt_exact([(delivery_id, token + 1)]) == 0

    shown = await _shown(sessionmaker, delivery_id)
    assert (shown["status"], shown["failures"]) == ("final_failed", 2)
    assert shown["last_error"] == "not confirmed within 2s; no retries left"
    assert _listed(shown) == [(1, 200), (2, 200)]
    assert shown["last_attempt_at"] == sent["last_attempt_at"]
    assert len(receiver.at("/unconfirmed")) == 2
    async with sessionmaker() as session:
        alerts = await session.execute(
            select(DeliveryAlert.attempt, DeliveryAlert.final, DeliveryAlert.error).where(
                DeliveryAlert.delivery_id == delivery_id
            )
        )
        assert alerts.all() == [(token + 1, True, "not confirmed within 2s; no retries left")]
