"""Reliable deliveries end to end: a real hub, real local receivers, real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import time
from email.message import Message

import pytest

from notifyhub.services import signing
from notifyhub.settings import DeliverySettings, Settings
from support.deliveries import define, get, post, unique, wait_status
from support.receiver import Received, Receiver, Reply
from support.smtp import Smtp


@pytest.fixture
def settings(settings: Settings, smtp: Smtp) -> Settings:
    deliveries = DeliverySettings(
        allow_networks=["127.0.0.1/32"],
        dispatcher_interval_s=0.05,
        jitter=0.0,
        smtp_port=smtp.port,
        lease_s=5,
        max_timeout_s=4,
    )
    return settings.model_copy(update={"deliveries": deliveries})


def _verified(secret: str, received: list[object]) -> bool:
    now_s = int(time.time())
    return all(
        signing.verify(secret, r.headers, r.body, now_s)  # type: ignore[attr-defined]
        for r in received
    )


async def test_fail_fail_succeed_is_sent_after_three_attempts_with_one_webhook_id(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("ffs")
    receiver.plan("/ffs", Reply(500), Reply(503))
    created = await define(
        hub.client, admin_key, name, url=receiver.url("/ffs"), retry_intervals="1s"
    )
    assert created["secret"].startswith("whsec_")

    delivery_id = await post(hub.client, publish_key, name, {"order": 42})
    found = await wait_status(hub.client, publish_key, delivery_id, "sent")

    assert [a["status_code"] for a in found["attempts"]] == [500, 503, 200]
    arrived = receiver.at("/ffs")
    assert len(arrived) == 3
    assert {r.headers["webhook-id"] for r in arrived} == {delivery_id}
    assert _verified(created["secret"], arrived)
    assert arrived[0].body == b'{"order":42}'


async def test_always_failing_ends_final_failed_with_exactly_one_alert_email(
    hub, admin_key: str, publish_key: str, receiver: Receiver, smtp: Smtp
) -> None:
    name = unique("down")
    receiver.plan("/down", default=Reply(500))
    await define(
        hub.client,
        admin_key,
        name,
        url=receiver.url("/down"),
        retry_intervals="1s",
        max_retries=2,
        alert={"trigger": "final_failure", "emails": ["ops@example.com"]},
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    found = await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    assert len(found["attempts"]) == 3
    assert len(receiver.at("/down")) == 3

    def mine() -> list[Message]:
        return [m for m in smtp.received if delivery_id in str(m["Subject"])]

    async with asyncio.timeout(10):
        while not mine():
            await asyncio.sleep(0.05)
    for _ in range(5):  # more dispatcher ticks owe nothing more
        await hub.app_state["dispatcher"].run_once()
    assert len(mine()) == 1
    assert mine()[0]["To"] == "ops@example.com"


async def test_every_failure_alerts_the_webhook_once_per_failure(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("alerts")
    receiver.plan("/flaky", Reply(500), Reply(502))
    created = await define(
        hub.client,
        admin_key,
        name,
        url=receiver.url("/flaky"),
        retry_intervals="1s",
        alert={"trigger": "every_failure", "webhook_url": receiver.url("/alerts")},
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await wait_status(hub.client, publish_key, delivery_id, "sent")
    alerts = await receiver.wait_for("/alerts", 2)
    for _ in range(5):
        await hub.app_state["dispatcher"].run_once()

    assert len(receiver.at("/alerts")) == 2
    bodies = [json.loads(a.body) for a in alerts]
    assert [b["attempt"] for b in bodies] == [1, 2]
    assert {b["delivery_id"] for b in bodies} == {delivery_id}
    assert _verified(created["secret"], alerts)


async def test_need_confirm_waits_then_confirm_makes_it_sent(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("confirm")
    await define(
        hub.client,
        admin_key,
        name,
        url=receiver.url("/confirm"),
        need_confirm=True,
        max_confirm_delay_s=60,
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await wait_status(hub.client, publish_key, delivery_id, "awaiting_confirm")

    response = await hub.client.post(
        f"/v1/deliveries/{delivery_id}/confirm",
        headers={"Authorization": f"Bearer {publish_key}"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "sent"
    assert len(receiver.at("/confirm")) == 1


async def test_unconfirmed_delivery_is_sent_again_after_the_confirm_deadline(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("reconfirm")
    await define(
        hub.client,
        admin_key,
        name,
        url=receiver.url("/reconfirm"),
        need_confirm=True,
        max_confirm_delay_s=1,
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    arrived = await receiver.wait_for("/reconfirm", 2)

    assert {r.headers["webhook-id"] for r in arrived} == {delivery_id}
    await hub.client.post(
        f"/v1/deliveries/{delivery_id}/confirm",
        headers={"Authorization": f"Bearer {publish_key}"},
    )
    assert (await get(hub.client, publish_key, delivery_id))["status"] == "sent"


async def test_a_confirm_from_inside_the_receivers_handler_is_accepted(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    """A receiver that confirms before it answers 200 found the delivery still `pending`
    (its attempt under way) and got 409; the hub sent it again after the confirm delay.
    The confirm is accepted, and the attempt it confirmed is listed once settled."""
    name = unique("inconfirm")
    answers: list[int] = []

    async def confirm(request: Received) -> None:
        response = await hub.client.post(
            f"/v1/deliveries/{request.headers['webhook-id']}/confirm",
            headers={"Authorization": f"Bearer {publish_key}"},
        )
        answers.append(response.status_code)

    receiver.plan("/inconfirm", default=Reply(200, before=confirm))
    await define(
        hub.client,
        admin_key,
        name,
        url=receiver.url("/inconfirm"),
        need_confirm=True,
        max_confirm_delay_s=60,
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await receiver.wait_for("/inconfirm", 1)
    async with asyncio.timeout(10):
        while not (found := await get(hub.client, publish_key, delivery_id))["attempts"]:
            await asyncio.sleep(0.05)
    for _ in range(3):
        await hub.app_state["dispatcher"].run_once()

    assert answers == [200]
    assert found["status"] == "sent"
    assert [(a["attempt"], a["status_code"]) for a in found["attempts"]] == [(1, 200)]
    assert len(receiver.at("/inconfirm")) == 1


async def test_unconfirmed_delivery_without_retries_left_finally_fails(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    """It ends without a send: the list shows the one attempt made (it listed a second,
    never sent, with no status); why it failed is its `last_error`, and its alert names
    the attempt that was not confirmed."""
    name = unique("noconfirm")
    await define(
        hub.client,
        admin_key,
        name,
        url=receiver.url("/noconfirm"),
        need_confirm=True,
        max_confirm_delay_s=1,
        max_retries=0,
        alert={"trigger": "final_failure", "webhook_url": receiver.url("/noconfirm-alerts")},
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    found = await wait_status(hub.client, publish_key, delivery_id, "final_failed")
    [alert] = await receiver.wait_for("/noconfirm-alerts", 1)

    assert found["last_error"] == "not confirmed within 1s; no retries left"
    assert [(a["attempt"], a["status_code"]) for a in found["attempts"]] == [(1, 200)]
    assert len(receiver.at("/noconfirm")) == 1
    body = json.loads(alert.body)
    assert (body["type"], body["attempt"], body["error"]) == (
        "delivery.final_failed",
        1,
        "not confirmed within 1s; no retries left",
    )


async def test_redirect_is_a_failure_and_its_target_is_never_visited(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("redirect")
    receiver.plan("/moved", default=Reply(302, {"Location": receiver.url("/internal")}))
    await define(hub.client, admin_key, name, url=receiver.url("/moved"), max_retries=0)
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    found = await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    assert found["attempts"][0]["status_code"] == 302
    assert "not followed" in found["attempts"][0]["error"]
    assert receiver.at("/internal") == []


async def test_gone_disables_the_definition(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("gone")
    receiver.plan("/gone", default=Reply(410))
    await define(hub.client, admin_key, name, url=receiver.url("/gone"), retry_intervals="1s")
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    refused = await hub.client.post(
        "/v1/deliveries",
        json={"definition": name, "payload": {}},
        headers={"Authorization": f"Bearer {publish_key}"},
    )
    assert refused.status_code == 409
    await define(hub.client, admin_key, name, url=receiver.url("/gone"))  # a PUT re-enables
    await post(hub.client, publish_key, name, {"n": 2})


async def test_retry_after_is_honoured_for_429(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("busy")
    receiver.plan("/busy", Reply(429, {"Retry-After": "120"}))
    await define(hub.client, admin_key, name, url=receiver.url("/busy"), retry_intervals="1s")
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    found = await wait_status(hub.client, publish_key, delivery_id, "failed")

    from datetime import UTC, datetime

    next_at = datetime.fromisoformat(found["next_attempt_at"].replace("Z", "+00:00"))
    assert (next_at - datetime.now(UTC)).total_seconds() > 100


async def test_manual_retry_replays_a_final_failed_delivery(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("replay")
    receiver.plan("/replay", Reply(500))
    await define(hub.client, admin_key, name, url=receiver.url("/replay"), max_retries=0)
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    response = await hub.client.post(
        f"/v1/deliveries/{delivery_id}/retry", headers={"Authorization": f"Bearer {admin_key}"}
    )
    assert response.status_code == 202, response.text
    found = await wait_status(hub.client, publish_key, delivery_id, "sent")
    assert [a["status_code"] for a in found["attempts"]] == [500, 200]
    assert {r.headers["webhook-id"] for r in receiver.at("/replay")} == {delivery_id}


async def test_attempts_after_a_manual_retry_are_numbered_consecutively(
    hub, admin_key: str, publish_key: str, receiver: Receiver, sessionmaker
) -> None:
    """Issue 22: fail, fail, manual retry, succeed was listed as attempts 1, 2, 4. The
    fencing token still moves on the replay (and on every claim); the numbers do not."""
    from notifyhub.db.models import Delivery

    name = unique("renumber")
    receiver.plan("/renumber", Reply(500), Reply(500))
    await define(
        hub.client,
        admin_key,
        name,
        url=receiver.url("/renumber"),
        retry_intervals="1s",
        max_retries=1,
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    response = await hub.client.post(
        f"/v1/deliveries/{delivery_id}/retry", headers={"Authorization": f"Bearer {admin_key}"}
    )
    assert response.status_code == 202, response.text
    found = await wait_status(hub.client, publish_key, delivery_id, "sent")

    assert [a["attempt"] for a in found["attempts"]] == [1, 2, 3]
    assert [a["status_code"] for a in found["attempts"]] == [500, 500, 200]
    assert {r.headers["webhook-id"] for r in receiver.at("/renumber")} == {delivery_id}
    assert len(receiver.at("/renumber")) == 3
    async with sessionmaker() as session:
        row = await session.get(Delivery, delivery_id)
        assert row is not None and row.attempt == 4  # three claims and the replay


async def test_alerts_after_a_manual_retry_number_attempts_as_the_list_does(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("realert")
    receiver.plan("/realert", Reply(500), Reply(500), Reply(500))
    await define(
        hub.client,
        admin_key,
        name,
        url=receiver.url("/realert"),
        retry_intervals="1s",
        max_retries=1,
        alert={"trigger": "every_failure", "webhook_url": receiver.url("/alerts")},
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await wait_status(hub.client, publish_key, delivery_id, "final_failed")
    response = await hub.client.post(
        f"/v1/deliveries/{delivery_id}/retry", headers={"Authorization": f"Bearer {admin_key}"}
    )
    assert response.status_code == 202, response.text
    found = await wait_status(hub.client, publish_key, delivery_id, "sent")
    alerts = await receiver.wait_for("/alerts", 3)

    assert [a["attempt"] for a in found["attempts"]] == [1, 2, 3, 4]
    assert [json.loads(a.body)["attempt"] for a in alerts] == [1, 2, 3]
    assert len({a.headers["webhook-id"] for a in alerts}) == 3


async def test_secret_rotation_signs_with_both_secrets(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("rotate")
    old = (await define(hub.client, admin_key, name, url=receiver.url("/rotate")))["secret"]
    rotated = await define(
        hub.client, admin_key, name, url=receiver.url("/rotate"), rotate_secret=True
    )
    new = rotated["secret"]
    assert new != old and rotated["rotating"] is True

    await post(hub.client, publish_key, name, {"n": 1})
    arrived = await receiver.wait_for("/rotate", 1)
    assert len(arrived[0].headers["webhook-signature"].split()) == 2
    assert _verified(old, arrived) and _verified(new, arrived)

    ended = await define(
        hub.client, admin_key, name, url=receiver.url("/rotate"), drop_previous_secret=True
    )
    assert ended["rotating"] is False


async def test_finished_deliveries_move_to_history_and_stay_readable(
    hub, admin_key: str, publish_key: str, receiver: Receiver, sessionmaker
) -> None:
    name = unique("history")
    await define(hub.client, admin_key, name, url=receiver.url("/history"))
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await wait_status(hub.client, publish_key, delivery_id, "sent")

    dispatcher = hub.app_state["dispatcher"]
    moving = {"history_after_s": 0, "history_batch": 10_000}  # every earlier test's too
    dispatcher._settings = dispatcher._settings.model_copy(update=moving)
    assert await dispatcher.housekeeping() >= 1
    from notifyhub.db.models import Delivery, DeliveryHistory

    async with sessionmaker() as session:
        assert await session.get(Delivery, delivery_id) is None
        assert await session.get(DeliveryHistory, delivery_id) is not None
    found = await get(hub.client, publish_key, delivery_id)
    assert found["status"] == "sent" and len(found["attempts"]) == 1


async def test_bad_inputs_are_refused(hub, admin_key: str, publish_key: str) -> None:
    auth = {"Authorization": f"Bearer {admin_key}"}
    for body in (
        {"url": "ftp://example.com/"},
        {"url": "https://example.com/", "retry_intervals": "5 parsecs"},
        {"url": "https://example.com/", "max_retries": -2},
        {"url": "https://example.com/", "alert": {"trigger": "after_n"}},
        {"url": "https://example.com/", "surprise": True},
    ):
        response = await hub.client.put(
            "/v1/admin/delivery-definitions/bad", json=body, headers=auth
        )
        assert response.status_code == 422, body
    unknown = await hub.client.post(
        "/v1/deliveries",
        json={"definition": "no-such-definition", "payload": {}},
        headers={"Authorization": f"Bearer {publish_key}"},
    )
    assert unknown.status_code == 422
    forbidden = await hub.client.put(
        "/v1/admin/delivery-definitions/x",
        json={"url": "https://example.com/"},
        headers={"Authorization": f"Bearer {publish_key}"},
    )
    assert forbidden.status_code == 403
    missing = await hub.client.get(
        "/v1/deliveries/01JD3Q4M6T9W2Z8K5N7R1C0B3X",
        headers={"Authorization": f"Bearer {publish_key}"},
    )
    assert missing.status_code == 404


async def test_payloads_jsonb_cannot_keep_are_422(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    """NUL (refused by jsonb) or 1e30 (written back as an integer orjson cannot send)."""
    name = unique("jsonb")
    await define(hub.client, admin_key, name, url=receiver.url("/jsonb"))
    for payload in ({"a\u0000b": 1}, {"a": "x\u0000"}, {"a": [1e30]}):
        response = await hub.client.post(
            "/v1/deliveries",
            json={"definition": name, "payload": payload},
            headers={"Authorization": f"Bearer {publish_key}"},
        )
        assert response.status_code == 422, response.text
        assert "payload" in response.text
    assert receiver.at("/jsonb") == []


async def test_metrics_and_readiness_cover_the_dispatcher(hub, publish_key: str) -> None:
    await hub.app_state["dispatcher"].housekeeping()
    text = (await hub.client.get("/metrics")).text
    assert 'notifyhub_deliveries{status="pending"}' in text
    assert "notifyhub_deliveries_oldest_pending_age_seconds" in text
    assert "notifyhub_delivery_attempt_duration_seconds" in text
    assert "deliveries-dispatcher" in hub.app_state["runner"].stuck(after_s=-3600)
