"""Actions: a copy's buttons, completed once, streamed, and told to a service through the
outbox exactly once, signed; bad input refused with nothing stored; tenants kept apart."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from notifyhub.services import signing
from notifyhub.services.actions import delivery_id
from notifyhub.settings import DeliverySettings, Settings
from support.deliveries import define, unique, wait_status
from support.receiver import Receiver
from support.sse import EventReader, open_stream

BASE = "/v1/me/notifications"
APPROVE = {"id": "approve", "label": "Approve", "style": "primary"}
REJECT = {"id": "reject", "label": "Reject", "style": "danger"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    deliveries = DeliverySettings(
        allow_networks=["127.0.0.1/32"], dispatcher_interval_s=0.05, jitter=0.0
    )
    return settings.model_copy(update={"deliveries": deliveries})


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _publish(hub: Any, key: str, user: str, **fields: Any) -> str:
    body = {"recipients": {"users": [user]}, "title": "Expense 42: 120 EUR", **fields}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def test_an_action_completes_once_and_is_streamed(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    token = make_token("act-once")
    me = _auth(token)
    nid = await _publish(hub, publish_key, "act-once", actions=[APPROVE, REJECT])
    listed = (await hub.client.get(f"{BASE}/{nid}", headers=me)).json()
    assert [a["id"] for a in listed["actions"]] == ["approve", "reject"]
    assert listed["actions"][0] == {**APPROVE, "url": None, "webhook": None}
    assert listed["completed"] is None and listed["status"] == "unread"

    async with open_stream(hub.client, token) as stream:
        await stream.next()  # the opening counts
        done = await hub.client.post(f"{BASE}/{nid}/actions/reject", headers=me)
        assert done.status_code == 200, done.text
        item = done.json()
        assert item["completed"]["action"] == "reject" and item["status"] == "read"
        update, _ = await stream.until("update")
        assert update.data["id"] == nid and update.data["status"] == "read"
        assert update.data["completed"] == item["completed"]
        counts, _ = await stream.until("counts")
        assert counts.data["unread"] == 0

    for action in ("reject", "approve"):  # the same again, or the other choice: refused
        again = await hub.client.post(f"{BASE}/{nid}/actions/{action}", headers=me)
        assert again.status_code == 409, again.text
        problem = again.json()
        assert again.headers["content-type"].startswith("application/problem+json")
        assert problem["completed"] == {**item["completed"], "completed_by": "act-once"}
        assert "'reject' was completed already" in problem["detail"]
    # marked unread later: still completed, and the list shows it
    await hub.client.patch(f"{BASE}/{nid}", json={"read": False}, headers=me)
    [shown] = (await hub.client.get(BASE, headers=me)).json()["items"]
    assert shown["completed"] == item["completed"] and shown["status"] == "unread"


async def test_resume_replays_the_completion_once(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    token = make_token("act-resume")
    me = _auth(token)
    async with open_stream(hub.client, token) as stream:
        nid = await _publish(hub, publish_key, "act-resume", actions=[APPROVE])
        await stream.until("notification")
        last = (await stream.next()).id
    await hub.client.post(f"{BASE}/{nid}/actions/approve", headers=me)
    headers = {**me, "Accept": "text/event-stream", "Last-Event-ID": str(last)}
    async with hub.client.stream("GET", "/v1/me/stream", headers=headers) as response:
        stream = EventReader(response)
        replayed, _ = await stream.until("update")
        assert replayed.data["completed"]["action"] == "approve"
        await hub.client.patch(f"{BASE}/{nid}", json={"pinned": True}, headers=me)
        live, between = await stream.until("update")  # not the completion a second time
        assert live.data["pinned"] is True and "completed" not in live.data
        assert all(e.event == "counts" for e in between)


async def test_a_webhook_action_reaches_its_service_once_signed(
    hub: Any, admin_key: str, publish_key: str, make_token: Any, receiver: Receiver
) -> None:
    definition = unique("approvals")
    created = await define(hub.client, admin_key, definition, url=receiver.url("/approvals"))
    me = _auth(make_token("act-hook"))
    action = {**APPROVE, "webhook": definition}
    data = {"expense": 42}
    target = {"type": "expense", "id": "42"}
    nid = await _publish(hub, publish_key, "act-hook", actions=[action], data=data, target=target)

    done = await hub.client.post(f"{BASE}/{nid}/actions/approve", headers=me)
    assert done.status_code == 200, done.text
    completed = done.json()["completed"]
    [arrived] = await receiver.wait_for("/approvals", 1)
    assert signing.verify(created["secret"], arrived.headers, arrived.body, int(time.time()))
    assert json.loads(arrived.body) == {
        "type": "action.completed",
        "tenant": "default",
        "user": "act-hook",
        "notification_id": nid,
        "action": "approve",
        "completed_at": completed["completed_at"],
        "notification": {
            "title": "Expense 42: 120 EUR",
            "category": None,
            "data": data,
            "target": target,
        },
    }
    # a retry (say, after a 503) is a 409 and adds no second delivery: the id is the same
    again = await hub.client.post(f"{BASE}/{nid}/actions/approve", headers=me)
    assert again.status_code == 409
    webhook_id = arrived.headers["webhook-id"]
    # the receiver has the request before the dispatcher records its answer: wait for it
    found = await wait_status(hub.client, publish_key, webhook_id, "sent")
    assert found["status"] == "sent" and found["definition"] == definition
    assert len(receiver.at("/approvals")) == 1


async def test_the_webhook_id_is_the_same_for_the_same_completion() -> None:
    first = delivery_id("t", "u", "01JD3Q4M6T9W2Z8K5N7R1C0B3X", 1_700_000_000_123)
    assert first == delivery_id("t", "u", "01JD3Q4M6T9W2Z8K5N7R1C0B3X", 1_700_000_000_123)
    assert first != delivery_id("t", "v", "01JD3Q4M6T9W2Z8K5N7R1C0B3X", 1_700_000_000_123)


@pytest.mark.parametrize(
    ("actions", "needle"),
    [
        ([APPROVE, REJECT, {"id": "later", "label": "Later"}, {"id": "x", "label": "X"}], "3"),
        ([APPROVE, APPROVE], "action ids must be distinct"),
        ([{"id": "Approve!", "label": "OK"}], "actions.0.id"),
        ([{"id": "ok", "label": ""}], "actions.0.label"),
        ([{"id": "ok", "label": "OK", "url": "javascript:alert(1)"}], "actions.0.url"),
        ([{"id": "ok", "label": "OK", "style": "loud"}], "actions.0.style"),
        ([{"id": "ok", "label": "OK", "colour": "red"}], "actions.0.colour"),
        ([{"id": "ok", "label": "OK", "webhook": "nowhere"}], "no delivery definition 'nowhere'"),
    ],
)
async def test_bad_actions_are_refused_and_nothing_is_stored(
    hub: Any, publish_key: str, make_token: Any, actions: list[Any], needle: str
) -> None:
    user = unique("act-bad")
    body = {"recipients": {"users": [user]}, "title": "t", "actions": actions}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert needle in response.text
    listed = await hub.client.get(BASE, headers=_auth(make_token(user)))
    assert listed.json()["items"] == []


async def test_unknown_action_or_notification_is_a_404_and_changes_nothing(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    me = _auth(make_token("act-404"))
    nid = await _publish(hub, publish_key, "act-404", actions=[APPROVE])
    plain = await _publish(hub, publish_key, "act-404")
    for path, detail in (
        (f"{nid}/actions/reject", "has no action 'reject' (approve)"),
        (f"{plain}/actions/approve", "has no action 'approve' (none)"),
        ("01JD3Q4M6T9W2Z8K5N7R1C0B3X/actions/approve", "no notification"),
    ):
        response = await hub.client.post(f"{BASE}/{path}", headers=me)
        assert response.status_code == 404, response.text
        assert detail in response.json()["detail"]
    malformed = await hub.client.post(f"{BASE}/{nid}/actions/Not%20an%20id", headers=me)
    assert malformed.status_code == 422
    item = (await hub.client.get(f"{BASE}/{nid}", headers=me)).json()
    assert item["completed"] is None and item["status"] == "unread"


async def test_another_tenants_copy_cannot_be_acted_on(
    hub: Any, create_key: Any, make_token: Any
) -> None:
    a, b = unique("ta"), unique("tb")
    keys = {t: _auth(await create_key("act-pub", "publish", t)) for t in (a, b)}
    body = {"tenant": b, "recipients": {"users": ["same"]}, "title": "B's", "actions": [APPROVE]}
    sent = await hub.client.post("/v1/notifications", json=body, headers=keys[b])
    nid = sent.json()["id"]
    # the same user id in tenant A: B's copy is not theirs
    in_a = await hub.client.post(
        f"{BASE}/{nid}/actions/approve", headers=_auth(make_token("same", a))
    )
    assert in_a.status_code == 404
    # a tenant-A key cannot publish a webhook action naming tenant B's definitions
    forged = {**body, "tenant": b}
    assert (
        await hub.client.post("/v1/notifications", json=forged, headers=keys[a])
    ).status_code == 403
    mine = _auth(make_token("same", b))
    assert (await hub.client.get(f"{BASE}/{nid}", headers=mine)).json()["completed"] is None
    assert (await hub.client.post(f"{BASE}/{nid}/actions/approve", headers=mine)).status_code == 200
