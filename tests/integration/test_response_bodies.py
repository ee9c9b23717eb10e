"""Bodies read through the response models are the ones clients always got: the same
keys, in the same order, with the same values (a time's text included)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
MESSAGE_KEYS = ["id", "tenant", "queue", "topic", "body", "priority", "ttl_ms", "biz_key", "due_at"]
DEFINITION_KEYS = [
    "tenant",
    "name",
    "kind",
    "url",
    "email",
    "rabbitmq",
    "timeout_s",
    "retry_intervals",
    "max_retries",
    "alert",
    "need_confirm",
    "max_confirm_delay_s",
    "disabled",
    "rotating",
]


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def consume_key(create_key: Any) -> str:
    return str(await create_key("test-consume-bodies", "consume"))


async def test_a_delayed_message_reads_as_before(
    hub: Any, publish_key: str, admin_key: str, consume_key: str
) -> None:
    queue = f"bodies-{uuid.uuid4().hex[:6]}"
    pushed = await hub.client.post(
        "/v1/delayed",
        json={"queue": queue, "body": {"n": [1, 2.5, None]}, "delay_ms": 0, "priority": 3},
        headers=_auth(publish_key),
    )
    assert pushed.status_code == 201, pushed.text
    message_id = pushed.json()["id"]
    got = await hub.client.get(f"/v1/delayed/{message_id}", headers=_auth(publish_key))
    assert got.status_code == 200
    body = got.json()
    assert list(body) == [*MESSAGE_KEYS, "status"]
    assert body["body"] == {"n": [1, 2.5, None]}
    assert (body["tenant"], body["queue"], body["priority"], body["biz_key"]) == (
        "default",
        queue,
        3,
        None,
    )
    assert RFC3339_MS.match(body["due_at"]), body["due_at"]
    assert body["status"] in ("delayed", "ready")

    await hub.app_state["delayed"].move()
    taken = await hub.client.get(f"/v1/queues/{queue}/messages", headers=_auth(consume_key))
    [message] = taken.json()["messages"]
    assert list(message) == [*MESSAGE_KEYS, "receipt"]
    assert {k: message[k] for k in MESSAGE_KEYS} == {k: body[k] for k in MESSAGE_KEYS}

    restored = await hub.client.post(f"/v1/delayed/{message_id}/restore", headers=_auth(admin_key))
    assert restored.status_code == 200
    assert restored.json() == {"restored": 0}  # reserved in Redis already: nothing to re-queue


async def test_a_definition_shows_its_secret_only_when_made_or_rotated(
    hub: Any, admin_key: str
) -> None:
    path = f"/v1/admin/delivery-definitions/bodies-{uuid.uuid4().hex[:6]}"
    definition = {"url": "https://receiver.example/hook", "alert": {"emails": ["a@b.c"]}}
    created = await hub.client.put(path, json=definition, headers=_auth(admin_key))
    assert created.status_code == 201, created.text
    assert list(created.json()) == [*DEFINITION_KEYS, "secret", "warnings"]  # PUT only
    assert created.json()["alert"] == {
        "trigger": "final_failure",
        "after_n": None,
        "emails": ["a@b.c"],
        "webhook_url": None,
    }
    replaced = await hub.client.put(path, json=definition, headers=_auth(admin_key))
    assert replaced.status_code == 200
    assert list(replaced.json()) == [*DEFINITION_KEYS, "warnings"]
    read = await hub.client.get(path, headers=_auth(admin_key))
    assert read.json() == {k: v for k, v in replaced.json().items() if k != "warnings"}
    rotated = await hub.client.put(
        path, json={**definition, "rotate_secret": True}, headers=_auth(admin_key)
    )
    assert rotated.json()["secret"] != created.json()["secret"]
    assert rotated.json()["rotating"] is True
