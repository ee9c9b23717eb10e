"""RabbitMQ delivery definitions end to end: a real hub and the broker on 127.0.0.1:5672.

Each test declares its own exchange and queue (unique names), consumes what the hub
published and compares it with the deliveries it posted. Without a broker the tests
skip (and say why), except under `CI=true`, where `.ci/run` makes sure one runs.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue
from pydantic import SecretStr

from notifyhub.services import signing
from notifyhub.settings import DeliverySettings, Settings
from support.amqp import AMQP_URL, require_broker
from support.deliveries import define, post, unique, wait_status
from support.proxy import CuttableProxy
from support.receiver import Receiver

require_broker()


@pytest.fixture
def settings(settings: Settings) -> Settings:
    deliveries = DeliverySettings(
        allow_networks=["127.0.0.1/32"],
        dispatcher_interval_s=0.05,
        jitter=0.0,
        lease_s=5,
        max_timeout_s=4,
    )
    return settings.model_copy(update={"deliveries": deliveries, "amqp_url": SecretStr(AMQP_URL)})


@pytest.fixture
async def channel() -> AsyncIterator[AbstractChannel]:
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        yield await connection.channel()


async def _bound(channel: AbstractChannel, routing_key: str) -> tuple[str, AbstractQueue]:
    """A fresh exchange and a queue bound to it with `routing_key` (both removed after)."""
    exchange = await channel.declare_exchange(unique("nh-ex"), auto_delete=True)
    queue = await channel.declare_queue(unique("nh-q"), auto_delete=True)
    await queue.bind(exchange, routing_key)
    return exchange.name, queue


async def _drain(queue: AbstractQueue) -> list[AbstractIncomingMessage]:
    """Everything in `queue` now (acked)."""
    found = []
    while (got := await queue.get(no_ack=True, fail=False)) is not None:
        found.append(got)
    return found


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_published_with_confirms_persistent_with_the_delivery_id_and_headers(
    hub: Any, admin_key: str, publish_key: str, channel: AbstractChannel
) -> None:
    exchange, queue = await _bound(channel, "order.paid")
    name = unique("amqp")
    rabbitmq = {"exchange": exchange, "routing_key": "order.paid"}
    shown = await define(hub.client, admin_key, name, kind="rabbitmq", rabbitmq=rabbitmq)
    assert (shown["kind"], shown["url"], shown["rabbitmq"]) == ("rabbitmq", None, rabbitmq)
    assert "guest" not in str(shown)

    ids = [await post(hub.client, publish_key, name, {"order": n}) for n in range(3)]
    for delivery_id in ids:
        found = await wait_status(hub.client, publish_key, delivery_id, "sent")
        assert [a["error"] for a in found["attempts"]] == [None]

    got = await _drain(queue)
    assert sorted(m.message_id or "" for m in got) == sorted(ids)
    by_id = {m.message_id: m for m in got}
    for n, delivery_id in enumerate(ids):
        m = by_id[delivery_id]
        assert m.body == b'{"order":%d}' % n
        assert m.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
        assert m.content_type == "application/json"
        assert m.headers == {"notifyhub-tenant": "default", "notifyhub-definition": name}


async def test_an_unroutable_or_missing_target_retries_and_nothing_is_lost(
    hub: Any, admin_key: str, publish_key: str, channel: AbstractChannel
) -> None:
    exchange = unique("nh-later")
    name = unique("amqp-later")
    rabbitmq = {"exchange": exchange, "routing_key": "k"}
    await define(
        hub.client, admin_key, name, kind="rabbitmq", rabbitmq=rabbitmq, retry_intervals="1s"
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    failed = await wait_status(hub.client, publish_key, delivery_id, "failed")
    assert "AMQP" in failed["attempts"][0]["error"] or "refused" in failed["attempts"][0]["error"]

    declared = await channel.declare_exchange(exchange, auto_delete=True)
    queue = await channel.declare_queue(unique("nh-q"), auto_delete=True)
    await queue.bind(declared, "k")
    await wait_status(hub.client, publish_key, delivery_id, "sent")
    assert [m.message_id for m in await _drain(queue)] == [delivery_id]


async def test_need_confirm_waits_for_the_receiving_systems_confirm(
    hub: Any, admin_key: str, publish_key: str, channel: AbstractChannel
) -> None:
    exchange, queue = await _bound(channel, "k")
    name = unique("amqp-confirm")
    await define(
        hub.client,
        admin_key,
        name,
        kind="rabbitmq",
        rabbitmq={"exchange": exchange, "routing_key": "k"},
        need_confirm=True,
        max_confirm_delay_s=600,
    )
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await wait_status(hub.client, publish_key, delivery_id, "awaiting_confirm")
    [m] = await _drain(queue)
    response = await hub.client.post(
        f"/v1/deliveries/{m.message_id}/confirm", headers=_auth(publish_key)
    )
    assert response.status_code == 200 and response.json()["status"] == "sent"


@pytest.mark.slow  # a fault: every broker connection closed, then waited back
@pytest.mark.skipif(shutil.which("rabbitmqctl") is None, reason="needs rabbitmqctl")
async def test_a_broker_closing_every_connection_mid_burst_loses_nothing(
    hub: Any, admin_key: str, publish_key: str, channel: AbstractChannel
) -> None:
    name = unique("amqp-kill")
    exchange_name = unique("nh-ex")
    queue_name = unique("nh-q")
    durable = await channel.declare_exchange(exchange_name, durable=True)
    queue = await channel.declare_queue(queue_name, durable=True)
    await queue.bind(durable, "k")
    await define(
        hub.client,
        admin_key,
        name,
        kind="rabbitmq",
        rabbitmq={"exchange": exchange_name, "routing_key": "k"},
        retry_intervals="1s",
    )
    first = [await post(hub.client, publish_key, name, {"n": n}) for n in range(5)]
    closed = await asyncio.create_subprocess_exec(
        "rabbitmqctl",
        "close_all_connections",
        "test: broker drops clients",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(closed.communicate(), 60)
    if closed.returncode != 0:
        pytest.skip(f"rabbitmqctl close_all_connections: {stderr.decode()[:200]}")
    second = [await post(hub.client, publish_key, name, {"n": n}) for n in range(5, 10)]
    for delivery_id in first + second:
        await wait_status(hub.client, publish_key, delivery_id, "sent")

    connection = await aio_pika.connect(AMQP_URL)  # the test's own was closed too
    async with connection:
        own = await connection.channel()
        again = await own.declare_queue(queue_name, durable=True)
        arrived = {m.message_id for m in await _drain(again)}
        await again.delete(if_unused=False, if_empty=False)
        await own.exchange_delete(exchange_name)
    assert arrived == set(first + second)  # every one at least once (duplicates share an id)


@pytest.mark.slow  # waits out confirm time-outs
async def test_a_confirm_that_never_comes_fails_the_attempt_and_a_retry_delivers_it(
    settings: Settings,
    start_hub: Callable[[Settings], AbstractAsyncContextManager[Any]],
    admin_key: str,
    publish_key: str,
    channel: AbstractChannel,
) -> None:
    """The hub's broker connection goes through a proxy that is frozen once it is open: the
    publish is written, no confirm comes (as from a blocked or hung broker)."""
    exchange, queue = await _bound(channel, "k")
    proxy = await CuttableProxy(5672).start()
    stalling = SecretStr(f"amqp://guest:guest@127.0.0.1:{proxy.port}/")
    try:
        async with start_hub(settings.model_copy(update={"amqp_url": stalling})) as hub:
            name = unique("amqp-stall")
            target = {"exchange": exchange, "routing_key": "k"}
            await define(hub.client, admin_key, name, kind="rabbitmq", rabbitmq=target,
                         timeout_s=1.0, retry_intervals="1s")  # fmt: skip
            before = await post(hub.client, publish_key, name, {"n": 0})  # opens the channel
            await wait_status(hub.client, publish_key, before, "sent")
            proxy.freeze()
            delivery_id = await post(hub.client, publish_key, name, {"n": 1})
            failed = await wait_status(hub.client, publish_key, delivery_id, "failed")
            proxy.thaw()
            sent = await wait_status(hub.client, publish_key, delivery_id, "sent")
    finally:
        await proxy.close()

    [first] = failed["attempts"]
    assert first["error"] == "AMQP: no publisher confirm within 1s", first
    *retried, last = [a["error"] for a in sent["attempts"]]
    assert last is None and set(retried) == {first["error"]}, sent["attempts"]
    arrived = [m.message_id for m in await _drain(queue)]
    assert set(arrived) == {before, delivery_id}  # the stalled publish may arrive twice


async def test_failures_of_a_rabbitmq_delivery_alert_the_webhook_like_a_webhooks(
    hub: Any, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("amqp-alert")
    missing = {"exchange": unique("nh-none"), "routing_key": "k"}
    alert = {"trigger": "every_failure", "webhook_url": receiver.url("/alerts")}
    created = await define(hub.client, admin_key, name, kind="rabbitmq", rabbitmq=missing,
                           retry_intervals="1s", max_retries=1, alert=alert)  # fmt: skip
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    hooks = await receiver.wait_for("/alerts", 2)
    for _ in range(3):  # more dispatcher ticks owe nothing more
        await hub.app_state["dispatcher"].run_once()
    assert len(receiver.at("/alerts")) == 2
    bodies = [json.loads(h.body) for h in hooks]
    assert [(b["type"], b["attempt"]) for b in bodies] == [
        ("delivery.failed", 1),
        ("delivery.final_failed", 2),
    ]
    assert {(b["delivery_id"], b["definition"]) for b in bodies} == {(delivery_id, name)}
    assert all("AMQP" in b["error"] or "refused" in b["error"] for b in bodies), bodies
    now_s = int(time.time())
    assert all(signing.verify(created["secret"], h.headers, h.body, now_s) for h in hooks)


async def test_tenant_a_cannot_read_use_or_repoint_bs_rabbitmq_definition(
    hub: Any, create_key: Any, channel: AbstractChannel
) -> None:
    exchange, queue = await _bound(channel, "k")
    a, b = unique("ta"), unique("tb")
    a_admin = await create_key(f"{a}-admin", "admin", a)
    a_publish = await create_key(f"{a}-publish", "publish", a)
    b_admin = await create_key(f"{b}-admin", "admin", b)
    name = unique("amqp")
    path = f"/v1/admin/delivery-definitions/{name}"
    target = {"exchange": exchange, "routing_key": "k"}
    await define(hub.client, b_admin, name, tenant=b, kind="rabbitmq", rabbitmq=target)

    for key in (a_admin, a_publish):
        read = await hub.client.get(path, params={"tenant": b}, headers=_auth(key))
        assert read.status_code == 403, read.text
    repoint = {"kind": "rabbitmq", "rabbitmq": {"exchange": "amq.topic", "routing_key": "x"}}
    for params, body in (({"tenant": b}, {}), ({}, {"tenant": b})):
        response = await hub.client.put(
            path, params=params, json={**repoint, **body}, headers=_auth(a_admin)
        )
        assert response.status_code == 403, response.text
    for tenant, expected in ((b, 403), (a, 422)):
        body = {"definition": name, "payload": {"n": 1}, "tenant": tenant}
        response = await hub.client.post("/v1/deliveries", json=body, headers=_auth(a_publish))
        assert response.status_code == expected, response.text

    seen = await hub.client.get(path, params={"tenant": b}, headers=_auth(b_admin))
    assert seen.json()["rabbitmq"] == target
    assert await _drain(queue) == []
