"""The delayed queue and scheduled notifications, on real Redis and PostgreSQL."""

from __future__ import annotations

import asyncio
import secrets
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from notifyhub.api.app import create_app
from notifyhub.db.unit import units
from notifyhub.services.delayed import DelayedService, NewMessage, TransitionLog
from notifyhub.store.delayed import DelayedStore
from notifyhub.store.keys import Keys, Queue
from support.delayed import DelayedCalls
from support.sse import EventReader
from support.tls import TEST_TLS


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def consume_key(create_key: Any) -> str:
    return str(await create_key("test-consume", "consume"))


async def _push(hub: Any, key: str, **fields: Any) -> str:
    response = await hub.client.post("/v1/delayed", json=fields, headers=_auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _move(hub: Any) -> None:
    """One pass of the hub's delayed mover (`DelayedMover.run_once`)."""
    await hub.app_state["runner"].loop("delayed-mover").step()


async def _take(
    hub: Any, key: str, queue: str, wait: int = 0, max_: int = 10
) -> list[dict[str, Any]]:
    response = await hub.client.get(
        f"/v1/queues/{queue}/messages", params={"wait": wait, "max": max_}, headers=_auth(key)
    )
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def test_not_before_due_then_promptly(hub: Any, publish_key: str, consume_key: str) -> None:
    # 1.5 s: the push (a PostgreSQL commit first) and the first take must both finish
    # before it is due, also on a loaded machine (with 0.6 s they sometimes did not).
    sent = await _push(
        hub, publish_key, queue="sms", body={"to": "+1"}, delay_ms=1500, biz_key="o-1"
    )
    assert await _take(hub, consume_key, "sms") == []
    started = time.monotonic()
    [message] = await _take(hub, consume_key, "sms", wait=10)
    waited = time.monotonic() - started
    assert message["id"] == sent
    assert message["body"] == {"to": "+1"}
    assert message["biz_key"] == "o-1"
    assert message["receipt"]
    assert waited < 5.0  # the long poll returned once the message fell due, not at 10 s
    status = (await hub.client.get(f"/v1/delayed/{sent}", headers=_auth(publish_key))).json()
    assert status["status"] == "reserved"


async def test_priority_among_equally_due(hub: Any, publish_key: str, consume_key: str) -> None:
    # A queue of its own: the suites share a database, and a hub on a fresh key prefix
    # restores what an earlier hub's log left unfinished (this test's own messages, from
    # the integration run, reappeared in the cluster run's queue ahead of its own).
    queue = f"prio-{secrets.token_hex(4)}"
    due = datetime.now(UTC).isoformat()
    ids = {
        p: await _push(hub, publish_key, queue=queue, body=p, due_at=due, priority=p)
        for p in (1, 9, 5)
    }
    await _move(hub)  # every one of them is ready now
    taken = await _take(hub, consume_key, queue, max_=3)
    assert [m["id"] for m in taken] == [ids[9], ids[5], ids[1]]


async def test_a_due_time_before_1970_is_refused(
    hub: Any, publish_key: str, consume_key: str
) -> None:
    # Ready scores are (9 - priority) * 1e13 + due_ms: a due time centuries before the
    # epoch (negative ms) fell into a higher priority's band, and a priority 0 message
    # due in year 1 was served before priority 6 ones (was 201). Epoch ms below 0 were
    # refused already; RFC 3339 times before 1970 now are too.
    for due_at in ("0001-01-02T00:00:00Z", "1969-12-31T23:59:59.999Z", "1970-01-01T01:00:00+02:00"):
        early = await hub.client.post(
            "/v1/delayed",
            json={"queue": "early", "body": 1, "due_at": due_at},
            headers=_auth(publish_key),
        )
        assert early.status_code == 422, early.text
        assert early.headers["content-type"] == "application/problem+json"
        assert "1970" in early.json()["detail"]
    epoch = await _push(hub, publish_key, queue="early", body=1, due_at="1970-01-01T00:00:00Z")
    ahead = await _push(hub, publish_key, queue="early", body=2, delay_ms=0, priority=6)
    await _move(hub)
    taken = await _take(hub, consume_key, "early", max_=2)
    assert [m["id"] for m in taken] == [ahead, epoch]


async def test_cancel_before_due_and_after_consume(
    hub: Any, publish_key: str, consume_key: str
) -> None:
    cancelled = await _push(hub, publish_key, queue="cx", body=1, delay_ms=300)
    assert (
        await hub.client.delete(f"/v1/delayed/{cancelled}", headers=_auth(publish_key))
    ).status_code == 204
    status = (await hub.client.get(f"/v1/delayed/{cancelled}", headers=_auth(publish_key))).json()
    assert status["status"] == "cancelled"
    assert await _take(hub, consume_key, "cx") == []
    consumed = await _push(hub, publish_key, queue="cx", body=2, delay_ms=0)
    [message] = await _take(hub, consume_key, "cx", wait=2)
    ack = await hub.client.post(
        f"/v1/queues/cx/messages/{consumed}/ack",
        json={"receipt": message["receipt"]},
        headers=_auth(consume_key),
    )
    assert ack.status_code == 204
    late = await hub.client.delete(f"/v1/delayed/{consumed}", headers=_auth(publish_key))
    assert late.status_code == 409
    unknown = await hub.client.delete(
        "/v1/delayed/01ARZ3NDEKTSV4RRFFQ69G5FAV", headers=_auth(publish_key)
    )
    assert unknown.status_code == 404


async def test_a_finished_message_keeps_only_its_state_in_redis(
    hub: Any, publish_key: str, consume_key: str, admin_key: str, redis: Redis
) -> None:
    """An acked or cancelled message's body, priority and ttl leave Redis (each snooze and
    scheduled notification is a message: kept whole, they stayed for good); its state
    still answers a status read, a second ack or cancel (409) and a restore (not queued
    again)."""
    store = hub.app_state["delayed"]._store
    acked = await _push(hub, publish_key, queue="fin", body={"big": "x" * 1000}, delay_ms=0)
    cancelled = await _push(hub, publish_key, queue="fin", body=2, delay_ms=60_000)
    [message] = await _take(hub, consume_key, "fin", wait=2)
    ack = {"receipt": message["receipt"]}
    url = f"/v1/queues/fin/messages/{acked}/ack"
    assert (await hub.client.post(url, json=ack, headers=_auth(consume_key))).status_code == 204
    deleted = await hub.client.delete(f"/v1/delayed/{cancelled}", headers=_auth(publish_key))
    assert deleted.status_code == 204
    for message_id, status in ((acked, "consumed"), (cancelled, "cancelled")):
        keys = store._set(message_id)
        assert await redis.hget(keys.msg, message_id) is None
        fields = [message_id, f"{message_id}:p", f"{message_id}:t", f"{message_id}:q"]
        kept = await redis.hmget(keys.state, fields)
        assert kept[0].decode().startswith(status) and kept[1:3] == [None, None] and kept[3]
        got = await hub.client.get(f"/v1/delayed/{message_id}", headers=_auth(publish_key))
        assert got.json()["status"] == status
    again = await hub.client.post(url, json=ack, headers=_auth(consume_key))
    assert again.status_code == 409
    late = await hub.client.delete(f"/v1/delayed/{cancelled}", headers=_auth(publish_key))
    assert late.status_code == 409
    restored = await hub.client.post("/v1/delayed/restore", headers=_auth(admin_key))
    assert restored.status_code == 200, restored.text
    assert await _take(hub, consume_key, "fin") == []


async def test_unacked_is_offered_again_after_ttl(
    hub: Any, publish_key: str, consume_key: str
) -> None:
    sent = await _push(hub, publish_key, queue="retry", body="x", delay_ms=0, ttl_ms=300)
    [first] = await _take(hub, consume_key, "retry", wait=2)
    assert await _take(hub, consume_key, "retry") == []  # invisible while reserved
    [again] = await _take(hub, consume_key, "retry", wait=3)
    assert again["id"] == sent
    assert again["receipt"] != first["receipt"]
    stale = await hub.client.post(
        f"/v1/queues/retry/messages/{sent}/ack",
        json={"receipt": first["receipt"]},
        headers=_auth(consume_key),
    )
    assert stale.status_code == 409
    assert stale.json()["detail"].startswith("no such receipt: not this message's current")
    ok = await hub.client.post(
        f"/v1/queues/retry/messages/{sent}/ack",
        json={"receipt": again["receipt"]},
        headers=_auth(consume_key),
    )
    assert ok.status_code == 204
    status = (await hub.client.get(f"/v1/delayed/{sent}", headers=_auth(publish_key))).json()
    assert status["status"] == "consumed"


async def test_an_ack_with_a_receipt_never_issued_says_so(
    hub: Any, publish_key: str, consume_key: str
) -> None:
    """A made-up receipt was told "stale receipt: the message was offered again after its
    ttl", which it never was: the 409 says the receipt is not the current reservation's."""
    sent = await _push(hub, publish_key, queue="fake-receipt", body="x", delay_ms=0)
    [taken] = await _take(hub, consume_key, "fake-receipt", wait=2)
    made_up = await hub.client.post(
        f"/v1/queues/fake-receipt/messages/{sent}/ack",
        json={"receipt": "made-up"},
        headers=_auth(consume_key),
    )
    assert made_up.status_code == 409
    detail = made_up.json()["detail"]
    assert detail.startswith("no such receipt: not this message's current reservation"), detail
    assert "made-up" not in detail and taken["receipt"] not in detail
    ok = await hub.client.post(
        f"/v1/queues/fake-receipt/messages/{sent}/ack",
        json={"receipt": taken["receipt"]},
        headers=_auth(consume_key),
    )
    assert ok.status_code == 204


async def test_redis_loss_then_restart_restores_unconsumed(
    hub: Any, publish_key: str, consume_key: str, settings: Any, redis: Redis
) -> None:
    done = await _push(hub, publish_key, queue="dr", body="acked", delay_ms=0)
    [m] = await _take(hub, consume_key, "dr", wait=2)
    await hub.client.post(
        f"/v1/queues/dr/messages/{done}/ack",
        json={"receipt": m["receipt"]},
        headers=_auth(consume_key),
    )
    pending = [await _push(hub, publish_key, queue="dr", body=i, delay_ms=200) for i in range(3)]
    # What FLUSHALL does to us, atomically like FLUSHALL: the running hub's epoch watch
    # must not rebuild between the deletion of two keys.
    lost = [key async for key in redis.scan_iter(match=settings.redis_prefix + "*", count=1000)]
    await redis.unlink(*lost)
    app = create_app(settings)
    async with app.router.lifespan_context(app) as state:  # a hub starting after the loss
        taken: list[Any] = []
        async with asyncio.timeout(5):  # restored, then moved when due (200 ms)
            while len(taken) < len(pending):
                taken += await state["delayed"].consume(Queue("default", "dr"), 0, 10)
                await asyncio.sleep(0.05)
    assert sorted(t.message.id for t in taken) == sorted(pending)


@pytest.mark.slow
async def test_two_movers_never_duplicate_or_lose(
    redis: Redis, settings: Any, sessionmaker: Any
) -> None:
    keys = Keys(settings.redis_prefix)
    services = [
        DelayedService(DelayedStore(redis, keys, 4), TransitionLog(units(sessionmaker)))
        for _ in range(2)
    ]
    pusher = DelayedCalls(services[0], sessionmaker)
    now_ms = int(time.time() * 1000)
    ids = [
        await pusher.push(NewMessage("default", "race", i, now_ms + (i % 20))) for i in range(300)
    ]
    await asyncio.sleep(0.05)
    for _ in range(20):
        await asyncio.gather(*(s.move(limit=7) for s in services))
    taken: list[str] = []
    while batch := await services[1].consume(Queue("default", "race"), 0, 100):
        taken += [m.message.id for m in batch]
    assert sorted(taken) == sorted(ids)
    assert len(taken) == len(set(taken))


async def test_scheduled_notification_arrives_on_time(hub: Any, publish_key: str) -> None:
    token = hub.tokens.mint_user_token("later")
    async with (
        httpx.AsyncClient(timeout=10, verify=TEST_TLS) as client,
        client.stream("GET", f"{hub.base_url}/v1/me/stream", headers=_auth(token)) as response,
    ):
        stream = EventReader(response)
        await stream.next()
        body = {"recipients": {"users": ["later"]}, "title": "Rate your visit", "delay": 1}
        accepted = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
        assert accepted.status_code == 202
        assert accepted.json()["scheduled_for"] is not None
        counts = (await hub.client.get("/v1/me/notifications/counts", headers=_auth(token))).json()
        assert counts["total"] == 0  # not before its time
        event, _ = await stream.until("notification", timeout=5)
        assert event.data["id"] == accepted.json()["id"]
        assert event.data["title"] == "Rate your visit"


async def test_recall_cancels_a_scheduled_notification(hub: Any, publish_key: str) -> None:
    body = {"recipients": {"users": ["recalled"]}, "title": "never", "delay": 60}
    sent = (
        await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    ).json()["id"]
    assert (
        await hub.client.delete(f"/v1/notifications/{sent}", headers=_auth(publish_key))
    ).status_code == 204
    status = (await hub.client.get(f"/v1/delayed/{sent}", headers=_auth(publish_key))).json()
    assert status["status"] == "cancelled"
    again = await hub.client.delete(f"/v1/notifications/{sent}", headers=_auth(publish_key))
    assert again.status_code == 409  # nothing left to cancel
    token = hub.tokens.mint_user_token("recalled")
    counts = (await hub.client.get("/v1/me/notifications/counts", headers=_auth(token))).json()
    assert counts["total"] == 0


@pytest.mark.parametrize("sent", ["ttl", "expires_at"])
async def test_a_scheduled_notification_past_the_longest_ttl_is_refused_at_once(
    hub: Any, publish_key: str, settings: Any, sent: str
) -> None:
    """Its expiry counts from its delivery, as when it is due: one past `max_ttl_s` is a
    422 naming the field sent, not a 202 dropped when due."""
    most = settings.max_ttl_s
    due_ms = int(time.time() * 1000) + 3_600_000
    too_far = {"ttl": most + 1} if sent == "ttl" else {"expires_at": due_ms + (most + 60) * 1000}
    for schedule in ({"delay": 3600}, {"deliver_at": due_ms}):
        body = {"recipients": {"users": ["far"]}, "title": "too far", **schedule, **too_far}
        response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith(f"{sent}: at most {most} seconds")


async def test_a_scheduled_notifications_longest_ttl_counts_from_its_delivery(
    hub: Any, publish_key: str, settings: Any
) -> None:
    """An `expires_at` further than `max_ttl_s` from now, but not from the delivery time,
    is accepted and delivered with it."""
    token = hub.tokens.mint_user_token("far-but-fine")
    due_ms = int(time.time() * 1000) + 1000
    expires_ms = due_ms + settings.max_ttl_s * 1000 - 500
    async with (
        httpx.AsyncClient(timeout=10, verify=TEST_TLS) as client,
        client.stream("GET", f"{hub.base_url}/v1/me/stream", headers=_auth(token)) as response,
    ):
        stream = EventReader(response)
        await stream.next()
        body = {
            "recipients": {"users": ["far-but-fine"]},
            "title": "a year from its delivery",
            "deliver_at": due_ms,
            "expires_at": expires_ms,
        }
        accepted = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
        assert accepted.status_code == 202, accepted.text
        event, _ = await stream.until("notification", timeout=5)
    assert event.data["id"] == accepted.json()["id"]
    expires_at = datetime.fromisoformat(event.data["expires_at"])
    assert int(expires_at.timestamp() * 1000) == expires_ms


async def test_delayed_auth_and_validation(hub: Any, publish_key: str, consume_key: str) -> None:
    assert (
        await hub.client.get("/v1/queues/sms/messages", headers=_auth(publish_key))
    ).status_code == 403
    reserved = await hub.client.get(
        "/v1/queues/notifyhub.scheduled/messages", headers=_auth(consume_key)
    )
    assert reserved.status_code == 422
    both = await hub.client.post(
        "/v1/delayed", json={"queue": "a", "delay_ms": 1, "due_at": 1}, headers=_auth(publish_key)
    )
    assert both.status_code == 422
    bad_priority = await hub.client.post(
        "/v1/delayed",
        json={"queue": "a", "delay_ms": 1, "priority": 10},
        headers=_auth(publish_key),
    )
    assert bad_priority.status_code == 422
    too_long = await hub.client.get("/v1/queues/sms/messages?wait=61", headers=_auth(consume_key))
    assert too_long.status_code == 422
    # in UTC before year 1 or past 9999 (Python holds neither): was 500
    for due_at in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-14:00"):
        beyond = await hub.client.post(
            "/v1/delayed", json={"queue": "a", "due_at": due_at}, headers=_auth(publish_key)
        )
        assert beyond.status_code == 422, beyond.text
        assert "must be within the years 1 to 9999 in UTC" in beyond.json()["detail"]


async def test_the_topic_paths_and_field_answer_as_queues_for_one_release(
    hub: Any, publish_key: str, consume_key: str
) -> None:
    """`/v1/topics/{topic}/messages` (and its ack) answer as the queue routes plus
    `Deprecation` and a successor `Link`; a push may name `topic` instead of `queue`."""
    sent = await _push(hub, publish_key, topic="legacy", body=1, delay_ms=0)
    await _move(hub)
    taken = await hub.client.get("/v1/topics/legacy/messages", headers=_auth(consume_key))
    assert taken.status_code == 200, taken.text
    assert taken.headers["deprecation"] == "true"
    assert taken.headers["link"] == '</v1/queues/legacy/messages>; rel="successor-version"'
    [message] = taken.json()["messages"]
    assert (message["id"], message["queue"], message["topic"]) == (sent, "legacy", "legacy")
    acked = await hub.client.post(
        f"/v1/topics/legacy/messages/{sent}/ack",
        json={"receipt": message["receipt"]},
        headers=_auth(consume_key),
    )
    assert acked.status_code == 204
    assert acked.headers["deprecation"] == "true"
    successor = f'</v1/queues/legacy/messages/{sent}/ack>; rel="successor-version"'
    assert acked.headers["link"] == successor
    fresh = await hub.client.get("/v1/queues/legacy/messages", headers=_auth(consume_key))
    assert "deprecation" not in fresh.headers
    both = await hub.client.post(
        "/v1/delayed", json={"queue": "a", "topic": "a", "delay_ms": 1}, headers=_auth(publish_key)
    )
    assert both.status_code == 422
    schema = (await hub.client.get("/openapi.json")).json()
    assert schema["paths"]["/v1/topics/{topic}/messages"]["get"]["deprecated"] is True
    assert "deprecated" not in schema["paths"]["/v1/queues/{queue}/messages"]["get"]


async def test_delayed_metrics_and_readiness(hub: Any, publish_key: str) -> None:
    await _push(hub, publish_key, queue="metered", body=1, delay_ms=60_000)

    async def backlog() -> float:
        text = (await hub.client.get("/metrics")).text
        lines = [
            line for line in text.splitlines() if line.startswith("notifyhub_delayed_backlog{")
        ]
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines)

    async with asyncio.timeout(10):  # the mover's next pass (idle: within mover_idle_s)
        while await backlog() < 1:
            await asyncio.sleep(0.05)
    text = (await hub.client.get("/metrics")).text
    assert "notifyhub_delayed_oldest_due_age_seconds" in text
    assert 'notifyhub_loop_last_success_timestamp_seconds{loop="delayed-mover"}' in text
    assert (await hub.client.get("/readyz")).json()["checks"]["loops"] is True


async def test_transitions_are_logged(
    hub: Any, publish_key: str, consume_key: str, sessionmaker: Any
) -> None:
    from sqlalchemy import select

    from notifyhub.db.models import DelayedTransition

    sent = await _push(hub, publish_key, queue="audit", body=1, delay_ms=0)
    [m] = await _take(hub, consume_key, "audit", wait=2)
    await hub.client.post(
        f"/v1/queues/audit/messages/{sent}/ack",
        json={"receipt": m["receipt"]},
        headers=_auth(consume_key),
    )
    query = (
        select(DelayedTransition.status, DelayedTransition.worker, DelayedTransition.host)
        .where(DelayedTransition.message_id == sent)
        .order_by(DelayedTransition.id)
    )
    rows: list[Any] = []
    async with asyncio.timeout(5):  # the log is flushed in batches, by its loop
        while len(rows) < 4:
            async with sessionmaker() as session:
                rows = list((await session.execute(query)).all())
            await asyncio.sleep(0.05)
    assert [r.status for r in rows] == ["delayed", "ready", "reserved", "consumed"]
    assert rows[1].worker == "mover"
    assert all(r.host for r in rows)
