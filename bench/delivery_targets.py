"""Deliveries to the e-mail and RabbitMQ targets: the outbox's rate against the bare
library sending the same messages in the same run, and latency from POST to receipt.

Each run: the hub restarted with the target's settings, a receiver in its own process
(`bench/sinks.py`: an aiosmtpd server, or a consumer of a queue bound to the
definition's exchange), a warm-up, then ROUNDS turns each of
- outbox: backlog / ROUNDS deliveries committed in one library-mode transaction,
  drained by the hub's dispatcher (commit to the last receipt);
- bare: as many messages (built by the hub's own `email_target.build` and
  `rabbitmq_target.message`, on the clock) sent by the library alone from this
  process: aiosmtplib on as many kept connections as the hub's pool, or aio-pika on
  one channel with publisher confirms and as many publishes in flight as the hub's
  `deliveries.concurrency` (start to the last receipt);
- latency: `sequential` POSTs one at a time, each from its sending to its receipt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aio_pika
import aiosmtplib
import httpcore
import httpx
import orjson
from aio_pika.abc import AbstractExchange
from cryptography.hazmat.primitives.asymmetric import ec

from bench import scenarios
from bench.clients import quantile
from bench.report import Skipped
from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.repositories import push_subscriptions
from notifyhub.db.repositories.push_subscriptions import NewSubscription, PushSubscriptionRow
from notifyhub.db.unit import UnitOfWork
from notifyhub.services import email_target, rabbitmq_target
from notifyhub.services.deliveries import DEFAULT_TENANT, enqueue
from notifyhub.services.vapid import VapidPair, b64url, public_point
from notifyhub.services.webpush_target import encrypt, vapid_authorization, webpush_payload
from notifyhub.settings import DeliverySettings

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
IN_FLIGHT = DeliverySettings().concurrency
"""The hub's sends in flight at most; the bare publisher keeps as many."""
EMAIL = {
    "to": ["bench@bench.test"],
    "subject": "bench {{ i }}",
    "text": "delivery {{ i }}: {{ pad }}",
}
BROWSERS = 8
"""Subscriptions the Web Push row's pushes go to in turn, one user each."""
WARM_UP = 50
ROUNDS = 2
"""The outbox and the bare library take turns, backlog / ROUNDS messages a turn, so both
see the same background load; each rate is all its messages over all its turns' time."""

BareRound = Callable[[int], Awaitable[float]]
"""Sends that many messages with the library alone; seconds from start to last receipt."""


def _payload(i: int) -> dict[str, Any]:
    return {"i": i, "pad": "x" * 200}


@dataclass(frozen=True)
class Messages:
    """What delivery `i` carries, and the id its receipt names (given the delivery's id)."""

    payload: Callable[[int], dict[str, Any]] = _payload
    receipt: Callable[[int, str], str] = lambda _, delivery_id: delivery_id


PLAIN = Messages()


class Sink:
    """The receiver's process; `arrived`: each id's first receipt (CLOCK_MONOTONIC)."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.repeated = 0
        """Receipts of an id already received."""

    @classmethod
    @contextlib.asynccontextmanager
    async def run(cls, *args: str) -> AsyncIterator[Sink]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.sinks", *args, stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        sink = cls()
        try:
            async with asyncio.timeout(30):
                assert (await proc.stdout.readline()).strip() == b"ready"
            reading = asyncio.create_task(sink._read(proc.stdout))
            try:
                yield sink
            finally:
                reading.cancel()
        finally:
            proc.terminate()
            await proc.wait()

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        while line := await stdout.readline():
            item_id, _, at = line.decode().partition(" ")
            self.repeated += item_id in self.arrived
            self.arrived.setdefault(item_id, float(at))

    async def last(self, ids: list[str], timeout_s: float = 120.0) -> float:
        """When the last of `ids` arrived (waits for it; raises when some never did)."""
        missing = list(ids)
        deadline = time.monotonic() + timeout_s
        while missing := [i for i in missing if i not in self.arrived]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(missing)} of {len(ids)} never arrived: {missing[:3]}")
            await asyncio.sleep(0.005)
        return max(self.arrived[i] for i in ids)


async def _define(hub: BenchHub, **body: Any) -> str:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=hub.base_url, timeout=30) as client:
        response = await client.put(
            f"/v1/admin/delivery-definitions/{name}",
            json={"timeout_s": 10, "retry_intervals": "1s", **body},
            headers={"Authorization": f"Bearer {hub.admin_key}"},
        )
    response.raise_for_status()
    return name


async def _commit(
    hub: BenchHub, name: str, first: int, total: int, messages: Messages = PLAIN
) -> tuple[list[str], float]:
    """`total` deliveries committed in one transaction: their receipts' ids, and when it
    committed."""
    engine = create_engine(str(hub.settings.database_url))
    try:
        async with UnitOfWork(create_sessionmaker(engine)) as unit:
            ids = [
                messages.receipt(i, await enqueue(unit, name, messages.payload(i)))
                for i in range(first, first + total)
            ]
        return ids, time.monotonic()
    finally:
        await engine.dispose()


async def _one_at_a_time(
    hub: BenchHub, sink: Sink, name: str, first: int, total: int, messages: Messages
) -> list[float]:
    """POST deliveries one after another; each one's ms from sending to receipt."""
    sent: dict[str, float] = {}
    auth = {"Authorization": f"Bearer {hub.publish_key}"}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=auth, timeout=30) as client:
        for i in range(first, first + total):
            body = {"definition": name, "payload": messages.payload(i)}
            started = time.monotonic()
            response = await client.post("/v1/deliveries", json=body)
            assert response.status_code == 202, response.text
            sent[messages.receipt(i, response.json()["id"])] = started
    await sink.last(list(sent))
    return sorted((sink.arrived[i] - t) * 1000 for i, t in sent.items())


async def _compare(
    hub: BenchHub,
    sink: Sink,
    name: str,
    bare: BareRound,
    backlog: int,
    sequential: int,
    messages: Messages = PLAIN,
) -> dict[str, float]:
    """Warm both up, take turns (ROUNDS each) at `backlog` messages in all, then time
    `sequential` POSTs one at a time."""
    warm, _ = await _commit(hub, name, 0, WARM_UP, messages)
    await sink.last(warm)
    await bare(WARM_UP)
    each, first = backlog // ROUNDS, WARM_UP
    outbox_s = bare_s = 0.0
    for _ in range(ROUNDS):
        ids, committed_at = await _commit(hub, name, first, each, messages)
        outbox_s += await sink.last(ids) - committed_at
        bare_s += await bare(each)
        first += each
    latencies = await _one_at_a_time(hub, sink, name, first, sequential, messages)
    return {
        "outbox": each * ROUNDS / outbox_s,
        "bare": each * ROUNDS / bare_s,
        "outbox / bare": bare_s / outbox_s,
        "p50 ms POST to receipt": quantile(latencies, 0.5),
        "p99 ms POST to receipt": quantile(latencies, 0.99),
    }


@contextlib.asynccontextmanager
async def _bare_smtp(port: int, sink: Sink) -> AsyncIterator[BareRound]:
    """aiosmtplib alone on as many kept connections as the hub's pool."""
    settings = DeliverySettings(smtp_port=port)
    options = email_target.smtp_options(settings)
    clients = [aiosmtplib.SMTP(**options) for _ in range(email_target.POOL_SIZE)]
    for client in clients:
        await client.connect()

    async def send(total: int) -> float:
        ids = [f"bare{uuid.uuid4().hex[:6]}{i}" for i in range(total)]
        numbered = iter(enumerate(ids))

        async def worker(client: aiosmtplib.SMTP) -> None:
            for n, item_id in numbered:
                mail = email_target.build(settings.smtp_sender, item_id, EMAIL, _payload(n))
                await client.sendmail(mail.sender, mail.recipients, mail.data)

        started = time.monotonic()
        await asyncio.gather(*(worker(c) for c in clients))
        return await sink.last(ids) - started

    try:
        yield send
    finally:
        for client in clients:
            client.close()


async def email(hub: BenchHub, backlog: int = 4000, sequential: int = 200) -> dict[str, float]:
    """The outbox's e-mails/s and latency to an aiosmtpd process, against aiosmtplib's."""
    port = _free_port()
    async with Sink.run("smtp", str(port)) as sink:
        await hub.restart(env={"NOTIFYHUB_DELIVERIES__SMTP_PORT": str(port)})
        name = await _define(hub, kind="email", email=EMAIL)
        async with _bare_smtp(port, sink) as bare:
            found = await _compare(hub, sink, name, bare, backlog, sequential)
    return _row("e-mails/s", "bare aiosmtplib e-mails/s (same pool)", found)


def _bare_amqp(exchange: AbstractExchange, sink: Sink) -> BareRound:
    """aio-pika alone: publishes with confirms, IN_FLIGHT at a time."""
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def publish(n: int, item_id: str) -> None:
        async with slots:
            message = rabbitmq_target.message(item_id, "default", "bare", _payload(n))
            await exchange.publish(message, routing_key="bench", mandatory=True)

    async def send(total: int) -> float:
        ids = [f"bare{uuid.uuid4().hex[:6]}{i}" for i in range(total)]
        started = time.monotonic()
        await asyncio.gather(*(publish(n, i) for n, i in enumerate(ids)))
        return await sink.last(ids) - started

    return send


async def rabbitmq(hub: BenchHub, backlog: int = 10_000, sequential: int = 200) -> dict[str, float]:
    """The outbox's publishes/s and latency through the broker to a consumer process,
    against aio-pika's own publishes with confirms."""
    try:
        connection = await aio_pika.connect(AMQP_URL, timeout=5)
    except (OSError, aio_pika.exceptions.AMQPError) as exc:
        raise Skipped(f"no RabbitMQ broker at {AMQP_URL}: {exc!r}") from exc
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.declare_exchange(f"bench-{uuid.uuid4().hex[:6]}", durable=True)
        queue = await channel.declare_queue(f"bench-{uuid.uuid4().hex[:6]}", durable=True)
        await queue.bind(exchange, "bench")
        try:
            async with Sink.run("amqp", AMQP_URL, queue.name) as sink:
                await hub.restart(env={"NOTIFYHUB_AMQP_URL": AMQP_URL})
                target = {"exchange": exchange.name, "routing_key": "bench"}
                name = await _define(hub, kind="rabbitmq", rabbitmq=target)
                bare = _bare_amqp(exchange, sink)
                found = await _compare(hub, sink, name, bare, backlog, sequential)
        finally:
            await queue.delete(if_unused=False, if_empty=False)
            await exchange.delete()
    return _row("publishes/s", f"bare aio-pika publishes/s ({IN_FLIGHT} in flight)", found)


def _row(unit: str, bare_name: str, found: dict[str, float]) -> dict[str, float]:
    """The report's names for `_compare`'s numbers."""
    outbox, bare = found.pop("outbox"), found.pop("bare")
    return {f"outbox {unit} (backlog)": outbox, bare_name: bare, **found}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def subscribe(
    hub: BenchHub, port: int, tenant: str, users: list[str]
) -> list[PushSubscriptionRow]:
    """One browser (a fresh P-256 key) for each of `tenant`'s `users`, at the push service
    on `port`."""
    engine = create_engine(str(hub.settings.database_url))
    rows = []
    try:
        async with UnitOfWork(create_sessionmaker(engine)) as unit:
            for user in users:
                browser = ec.generate_private_key(ec.SECP256R1())
                new = NewSubscription(
                    f"http://127.0.0.1:{port}/push/{user}",
                    public_point(browser),
                    b64url(os.urandom(16)),
                )
                added = await push_subscriptions.add(
                    unit.session, tenant, user, new, new_id=f"bench{uuid.uuid4().hex[:20]}"
                )
                assert added is not None
                rows.append(added[0])
        return rows
    finally:
        await engine.dispose()


def _pushes(browsers: list[PushSubscriptionRow]) -> Messages:
    """Push `i` goes to browser i % BROWSERS with `Topic: w<i>` (the sink's id for it)."""

    def payload(i: int) -> dict[str, Any]:
        return webpush_payload(browsers[i % len(browsers)].id, _payload(i), topic=f"w{i}")

    return Messages(payload, lambda i, _: f"w{i}")


@contextlib.asynccontextmanager
async def _bare_push(browsers: list[PushSubscriptionRow], sink: Sink) -> AsyncIterator[BareRound]:
    """httpcore (the hub's HTTP client) alone on IN_FLIGHT kept connections, each push
    encrypted and signed by the hub's code in its turn."""
    key = ec.generate_private_key(ec.SECP256R1())
    pair = VapidPair(key, public_point(key), "mailto:bench@bench.test")
    origin = httpcore.Origin(b"http", b"127.0.0.1", int(urlsplit(browsers[0].endpoint).port or 80))
    connections = [httpcore.AsyncHTTPConnection(origin) for _ in range(IN_FLIGHT)]

    async def push(connection: httpcore.AsyncHTTPConnection, n: int, topic: str) -> None:
        browser = browsers[n % len(browsers)]
        headers = [
            ("ttl", "86400"),
            ("urgency", "normal"),
            ("topic", topic),
            ("content-type", "application/octet-stream"),
            ("content-encoding", "aes128gcm"),
            ("authorization", vapid_authorization(pair, browser.endpoint)),
        ]
        body = encrypt(orjson.dumps(_payload(n)), browser.p256dh, browser.auth)
        response = await connection.request("POST", browser.endpoint, headers=headers, content=body)
        assert response.status == 201, response.content

    async def send(total: int) -> float:
        ids = [f"bare{uuid.uuid4().hex[:6]}{i}" for i in range(total)]
        numbered = iter(enumerate(ids))

        async def worker(connection: httpcore.AsyncHTTPConnection) -> None:
            for n, topic in numbered:
                await push(connection, n, topic)

        started = time.monotonic()
        await asyncio.gather(*(worker(c) for c in connections))
        return await sink.last(ids) - started

    try:
        yield send
    finally:
        for connection in connections:
            await connection.aclose()


def _crypto_us(browser: PushSubscriptionRow, times: int = 500) -> dict[str, float]:
    """What one push costs this process in the hub's code: its encryption (a new P-256
    key pair, ECDH, HKDF, AES-GCM) and signing a VAPID token (ES256), us each."""
    key = ec.generate_private_key(ec.SECP256R1())
    pair = VapidPair(key, public_point(key), "mailto:bench@bench.test")
    plaintext = orjson.dumps(_payload(0))
    started = time.perf_counter()
    for _ in range(times):
        encrypt(plaintext, browser.p256dh, browser.auth)
    encrypted = time.perf_counter()
    for _ in range(times):
        vapid_authorization(pair, browser.endpoint)
    signed = time.perf_counter()
    return {
        "us to encrypt a push": (encrypted - started) / times * 1e6,
        "us to sign a VAPID token": (signed - encrypted) / times * 1e6,
    }


async def webpush(hub: BenchHub, backlog: int = 4000, sequential: int = 200) -> dict[str, float]:
    """The outbox's Web Push sends/s and latency to a push service process, against httpx
    alone sending the same encrypted, signed pushes."""
    port = _free_port()
    async with Sink.run("push", str(port)) as sink:
        browsers = await subscribe(
            hub, port, DEFAULT_TENANT, [f"bench-{n}" for n in range(BROWSERS)]
        )
        name = await _define(hub, kind="webpush")
        pushes = _pushes(browsers)
        async with _bare_push(browsers, sink) as bare:
            found = await _compare(hub, sink, name, bare, backlog, sequential, pushes)
    row = _row("sends/s", f"bare httpcore sends/s ({IN_FLIGHT} in flight)", found)
    return {**row, **_crypto_us(browsers[0])}


scenarios.ALL += [
    ("deliveries: e-mail to a local SMTP server", email),
    ("deliveries: RabbitMQ publishes with confirms", rabbitmq),
    ("deliveries: Web Push to a local push service", webpush),
]
