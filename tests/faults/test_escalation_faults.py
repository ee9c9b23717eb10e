"""Escalation through a fault (issue 41 item 1): 1,000 notifications, each with a 2 s push
step (`unless: seen`) and a 4 s e-mail step (`unless: read`), half of them read by a
client at random times (a quarter of those just before a step falls due), and in the
middle of it the hub is killed -9 (and started again), or Redis is flushed (durable
inbox mode). Publishes carry an Idempotency-Key and are retried until acknowledged.

Counted where they arrive (a local SMTP server, a local push service): every step the
hub finished as sent must arrive (lost otherwise; a kill between a send and its
settlement re-sends it: duplicated), every step of a notification never read must be
among them (never skipped), no step whose copy was read before it fell due may arrive,
and no step may stay pending.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from ulid import ULID

from notifyhub.db.models import Escalation
from support.faultenv import FaultEnv
from support.history import History, Verdict
from support.pushservice import PushService
from support.smtp import Smtp
from support.webpush import Browser

pytestmark = pytest.mark.slow

NOTIFICATIONS = 1000
USERS = 10
WRITERS = 8
PUSH_S, EMAIL_S = 2, 4
STEPS = [
    {"after_s": PUSH_S, "unless": "seen", "channel": "push"},
    {"after_s": EMAIL_S, "unless": "read", "channel": "email"},
]
DRAIN_S = 90.0


@pytest.fixture
async def push() -> AsyncIterator[PushService]:
    service = await PushService().start()
    yield service
    await service.close()


class _Client:
    """Publishes and reads as an application does, retrying what the fault cut off."""

    def __init__(self, env: FaultEnv, tokens: dict[str, str]) -> None:
        self.http = httpx.AsyncClient(base_url=env.hub.base_url, timeout=5)
        self._publish = {"Authorization": f"Bearer {env.publish_key}"}
        self._tokens = tokens
        self.made_ms: dict[str, int] = {}
        self.read_at_ms: dict[str, int] = {}
        self.acknowledged = 0
        self.last_ack_at = 0.0

    async def _retry(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        while True:
            try:
                response = await self.http.request(method, url, **kwargs)
            except httpx.HTTPError:
                await asyncio.sleep(0.05)  # the hub is down or restarting: again
                continue
            if response.is_success:
                return response
            await asyncio.sleep(0.05)

    async def publish(self, i: int, user: str) -> str:
        title = f"n{i}"
        body = {"recipients": {"users": [user]}, "title": title, "escalate": STEPS}
        headers = {**self._publish, "Idempotency-Key": f"esc-{i}"}
        response = await self._retry("POST", "/v1/notifications", json=body, headers=headers)
        nid = str(response.json()["id"])
        self.made_ms[title] = ULID.from_str(nid).milliseconds
        self.acknowledged += 1
        self.last_ack_at = time.monotonic()
        return nid

    async def read_later(self, title: str, nid: str, user: str, after_s: float) -> None:
        delay = self.made_ms[title] / 1000 + after_s - time.time()
        await asyncio.sleep(max(0.0, delay))  # the client's own timing
        headers = {"Authorization": f"Bearer {self._tokens[user]}"}
        url = f"/v1/me/notifications/{nid}"
        response = await self._retry("PATCH", url, json={"read": True}, headers=headers)
        read_at = datetime.fromisoformat(response.json()["read_at"])
        self.read_at_ms[title] = int(read_at.timestamp() * 1000)


async def _users(env: FaultEnv, push: PushService) -> dict[str, str]:
    """USERS users, each with an address and one browser; their tokens."""
    admin = {"Authorization": f"Bearer {env.admin_key}"}
    tokens = {}
    async with httpx.AsyncClient(base_url=env.hub.base_url, timeout=10) as client:
        for n in range(USERS):
            user = f"u{n}"
            url = f"/v1/admin/users/default/{user}"
            response = await client.put(url, json={"email": f"{user}@x.test"}, headers=admin)
            assert response.status_code == 201, response.text
            token = env.user_token(user)
            me = {"Authorization": f"Bearer {token}"}
            key = (await client.get("/v1/me/push-key", headers=me)).json()["public_key"]
            browser = Browser()
            _sid, endpoint = push.subscribe(browser, key)
            body = browser.subscription(endpoint)
            response = await client.post("/v1/me/push-subscriptions", json=body, headers=me)
            assert response.status_code == 201, response.text
            tokens[user] = token
    return tokens


def _read_after_s(rng: random.Random, i: int) -> float:
    if i % 4 == 0:
        return PUSH_S - rng.uniform(0.001, 0.050)
    if i % 4 == 1:
        return EMAIL_S - rng.uniform(0.001, 0.050)
    return rng.uniform(0.1, 5.0)


async def _workload(client: _Client, tokens: dict[str, str]) -> None:
    rng = random.Random(41)
    chosen = set(rng.sample(range(NOTIFICATIONS), NOTIFICATIONS // 2))
    users = sorted(tokens)
    work = iter(range(NOTIFICATIONS))
    readers: list[asyncio.Task[None]] = []

    async def writer() -> None:
        for i in work:
            user = users[i % USERS]
            nid = await client.publish(i, user)
            if i in chosen:
                after = _read_after_s(rng, len(readers))
                readers.append(asyncio.create_task(client.read_later(f"n{i}", nid, user, after)))

    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    await asyncio.gather(*readers)


async def _kill_hub(env: FaultEnv, client: _Client) -> None:
    await _halfway(client)
    await env.hub.kill()
    await env.hub.start()


async def _flush_redis(env: FaultEnv, client: _Client) -> None:
    await _halfway(client)
    redis = env.redis.client()
    try:
        redis.flushall()
    finally:
        redis.close()


async def _halfway(client: _Client) -> None:
    async with asyncio.timeout(120):
        while client.acknowledged < NOTIFICATIONS // 2:
            await asyncio.sleep(0.01)


async def _finished(database_url: str) -> list[Escalation]:
    """Every step, once none is pending (DRAIN_S at most)."""
    engine = create_async_engine(database_url)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    try:
        async with asyncio.timeout(DRAIN_S):
            while True:
                async with sessions() as session:
                    pending = await session.scalar(
                        select(func.count())
                        .select_from(Escalation)
                        .where(Escalation.status == "pending")
                    )
                    if pending == 0:
                        return list(await session.scalars(select(Escalation)))
                await asyncio.sleep(0.5)
    finally:
        await engine.dispose()


SCENARIOS = {
    "hub kill -9 during 1,000 escalations (2,000 steps)": (_kill_hub, "redis"),
    "durable inbox: Redis FLUSHALL during 1,000 escalations (2,000 steps)": (
        _flush_redis,
        "postgres",
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_escalation_steps_through_a_fault(
    scenario: str,
    fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]],
    fault_report: list[Verdict],
    smtp: Smtp,
    push: PushService,
) -> None:
    fault, durability = SCENARIOS[scenario]
    extra_env = {
        "NOTIFYHUB_DELIVERIES__SMTP_PORT": str(smtp.port),
        "NOTIFYHUB_DELIVERIES__JITTER": "0",
    }
    async with fault_env(durability=durability, extra_env=extra_env) as env:
        tokens = await _users(env, push)
        client = _Client(env, tokens)
        try:
            await asyncio.gather(_workload(client, tokens), fault(env, client))
            rows = await _finished(str(env.settings.database_url))
            history = History("escalation steps sent (e-mails + pushes)")
            for row in rows:
                if row.status == "sent":
                    history.ack(f"{row.notification['title']}/{row.channel}")

            def collect() -> None:
                pushed = Counter(
                    f"{p.message['title']}/push" for p in push.received if p.status == 201
                )
                mailed = Counter({f"{s}/email": n for s, n in smtp.count_by("Subject").items()})
                history.arrivals = pushed + mailed

            deadline = time.monotonic() + DRAIN_S
            while history.missing() and time.monotonic() < deadline:
                collect()
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # a duplicate would arrive by now
            collect()
            drained = time.monotonic() - client.last_ack_at
        finally:
            await client.http.aclose()
        log = env.hub.log_path.read_text()
    read_first = [
        row
        for row in rows
        if row.notification["title"] in client.read_at_ms
        and client.read_at_ms[row.notification["title"]]
        < client.made_ms[row.notification["title"]]
        + (PUSH_S if row.channel == "push" else EMAIL_S) * 1000
    ]
    sent_anyway = sum(1 for row in read_first if row.status == "sent")
    history.workload += f"; {len(read_first)} read before due, {sent_anyway} of them sent"
    verdict = history.verdict(scenario)
    fault_report.append(dataclasses.replace(verdict, drain_s=drained))
    assert verdict.lost == 0, verdict.lost_ids[:10]
    assert "Exception in ASGI application" not in log
    for row in rows:
        title = row.notification["title"]
        due_ms = client.made_ms[title] + (PUSH_S if row.channel == "push" else EMAIL_S) * 1000
        arrived = history.arrivals[f"{title}/{row.channel}"]
        if title not in client.read_at_ms:  # never read: never skipped
            assert row.status == "sent", (title, row.channel, row.outcome)
        elif client.read_at_ms[title] < due_ms and durability == "redis":
            assert (row.status, arrived) == ("cancelled", 0), (title, row.channel, row.outcome)
        if row.status != "sent":
            assert arrived == 0, (title, row.channel, row.outcome)
