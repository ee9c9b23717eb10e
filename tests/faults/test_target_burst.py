"""kill -9 of the hub during a burst of e-mail and RabbitMQ deliveries (issue 37, item 1).

Writers POST 1,000 deliveries to an `email` definition (a real aiosmtpd on loopback,
in this process's thread) and 1,000 to a `rabbitmq` definition (the machine's broker; a
durable queue bound to a durable exchange, consumed by this test). Half way through
the hub is killed -9 and started again; the writers retry each delivery until it is
acknowledged (202). Every acknowledged id must arrive at least once: e-mails are known
by `Message-ID` (`<id@notifyhub>`), publishes by `message_id`; an attempt the kill cut
between send and settlement is re-sent after the lease, and counted as duplicated.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import aio_pika
import httpx
import pytest
from aio_pika.abc import AbstractIncomingMessage

from support.amqp import AMQP_URL, require_broker
from support.deliveries import define, unique
from support.faultenv import FaultEnv
from support.history import History, Verdict
from support.smtp import Smtp

pytestmark = pytest.mark.slow
require_broker()

SCENARIO = "hub kill -9 during a burst of 1,000 e-mails and 1,000 RabbitMQ publishes"
PER_KIND = 1000
WRITERS = 8
KILL_AT = PER_KIND  # acknowledged deliveries of both kinds together
DRAIN_S = 120.0
EMAIL = {"to": ["burst@faults.test"], "subject": "burst {{ n }}", "text": "delivery {{ n }}"}


@pytest.fixture
async def amqp_queue() -> AsyncIterator[tuple[str, Counter[str]]]:
    """A durable exchange and queue (they outlive any connection); every message's
    `message_id` counted as it arrives. Both deleted after the test."""
    arrivals: Counter[str] = Counter()
    exchange_name, queue_name = unique("nh-burst-ex"), unique("nh-burst-q")
    connection = await aio_pika.connect_robust(AMQP_URL)
    async with connection:
        channel = await connection.channel()
        exchange = await channel.declare_exchange(exchange_name, durable=True)
        queue = await channel.declare_queue(queue_name, durable=True)
        await queue.bind(exchange, "burst")

        async def count(message: AbstractIncomingMessage) -> None:
            arrivals[message.message_id or ""] += 1

        await queue.consume(count, no_ack=True)
        try:
            yield exchange_name, arrivals
        finally:
            await queue.delete(if_unused=False, if_empty=False)
            await channel.exchange_delete(exchange_name)


class _Burst:
    """Writers POSTing `PER_KIND` deliveries of each definition, each retried until 202."""

    def __init__(self, env: FaultEnv, definitions: dict[str, History]) -> None:
        self._client = httpx.AsyncClient(base_url=env.hub.base_url, timeout=5)
        self._auth = {"Authorization": f"Bearer {env.publish_key}"}
        self._work = iter([(d, n) for n in range(PER_KIND) for d in definitions])
        self.histories = definitions
        self.acknowledged = 0
        self.last_ack_at = 0.0

    async def _post(self, definition: str, n: int) -> None:
        body = {"definition": definition, "payload": {"n": n}}
        while True:
            try:
                response = await self._client.post("/v1/deliveries", json=body, headers=self._auth)
            except httpx.HTTPError:
                await asyncio.sleep(0.1)  # the hub is down: the same delivery again
                continue
            if response.status_code == 202:
                self.histories[definition].ack(response.json()["id"])
                self.acknowledged += 1
                self.last_ack_at = time.monotonic()
                return
            await asyncio.sleep(0.1)

    async def _writer(self) -> None:
        for definition, n in self._work:
            await self._post(definition, n)

    async def run(self) -> None:
        try:
            await asyncio.gather(*(self._writer() for _ in range(WRITERS)))
        finally:
            await self._client.aclose()


async def _kill_mid_burst(env: FaultEnv, burst: _Burst) -> None:
    async with asyncio.timeout(60):
        while burst.acknowledged < KILL_AT:
            await asyncio.sleep(0.01)
    await env.hub.kill()
    await env.hub.start()


async def _define_both(env: FaultEnv, exchange: str) -> tuple[str, str]:
    mail, amqp = unique("burst-mail"), unique("burst-amqp")
    retry = {"retry_intervals": "1s", "max_retries": -1}
    async with httpx.AsyncClient(base_url=env.hub.base_url, timeout=5) as client:
        await define(client, env.admin_key, mail, kind="email", email=EMAIL, **retry)
        target = {"exchange": exchange, "routing_key": "burst"}
        await define(client, env.admin_key, amqp, kind="rabbitmq", rabbitmq=target, **retry)
    return mail, amqp


async def _until_arrived(
    collect: Callable[[], None], histories: list[History], timeout_s: float
) -> list[float]:
    """When each history had every acknowledged id (monotonic; the deadline for one that
    never had)."""
    deadline = time.monotonic() + timeout_s
    done: dict[int, float] = {}
    while len(done) < len(histories) and time.monotonic() < deadline:
        collect()
        for n, history in enumerate(histories):
            if n not in done and not history.missing():
                done[n] = time.monotonic()
        await asyncio.sleep(0.05)
    collect()
    return [done.get(n, deadline) for n in range(len(histories))]


async def test_a_hub_killed_mid_burst_loses_no_email_and_no_publish(
    fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]],
    fault_report: list[Verdict],
    smtp: Smtp,
    amqp_queue: tuple[str, Counter[str]],
) -> None:
    exchange, published = amqp_queue
    extra_env = {"NOTIFYHUB_DELIVERIES__SMTP_PORT": str(smtp.port), "NOTIFYHUB_AMQP_URL": AMQP_URL}
    async with fault_env(extra_env=extra_env) as env:
        mail, amqp = await _define_both(env, exchange)
        emails, publishes = History("e-mails (Message-ID)"), History("RabbitMQ (message_id)")
        burst = _Burst(env, {mail: emails, amqp: publishes})
        pid = env.hub.proc.pid if env.hub.proc else None
        await asyncio.gather(burst.run(), _kill_mid_burst(env, burst))
        assert env.hub.proc is not None and env.hub.proc.pid != pid  # it was killed

        def collect() -> None:
            mailed = smtp.count_by("Message-ID")
            for history, arrivals, form in (
                (emails, mailed, "<{}@notifyhub>"),
                (publishes, published, "{}"),
            ):
                found = {i: arrivals[form.format(i)] for i in history.acknowledged}
                history.arrivals = Counter(found)

        histories = [emails, publishes]
        drained_at = await _until_arrived(collect, histories, DRAIN_S)
    verdicts = [
        dataclasses.replace(h.verdict(SCENARIO), drain_s=at - burst.last_ack_at)
        for h, at in zip(histories, drained_at, strict=True)
    ]
    fault_report.extend(verdicts)
    for verdict in verdicts:
        assert verdict.acknowledged == PER_KIND, verdict
        assert verdict.lost == 0, (verdict.workload, verdict.lost_ids[:10])
    assert "Exception in ASGI application" not in env.hub.log_path.read_text()
