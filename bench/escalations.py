"""Escalation (issue 41 item 1): 1,000 notifications for 20 users, each with a 2 s push
step (`unless: seen`) and a 4 s e-mail step (`unless: read`); a client reads half of
them at random times, a quarter of those within 50 ms before a step's due time.

The hub (its own escalation worker and dispatcher, real clock) e-mails an aiosmtpd
process and pushes to a push service process (bench/sinks.py). Lateness: a step's
e-mail or push arriving there minus its due time (`escalations.due_at`), wall clock on
one machine; a step "fired" when the worker decided it (`done_at`)."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from datetime import datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import asyncpg
import httpx
import orjson

from bench import scenarios
from bench.clients import add_addresses, quantile
from bench.delivery_targets import Sink, _free_port, subscribe
from notifyhub.services.channel_rows import EMAIL, push_topic
from notifyhub.services.channels import delivery_id
from notifyhub.services.escalation_sends import send_of

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

NOTIFICATIONS = 1000
USERS = 20
PUSH_S, EMAIL_S = 2, 4
STEPS = [
    {"after_s": PUSH_S, "unless": "seen", "channel": "push"},
    {"after_s": EMAIL_S, "unless": "read", "channel": "email"},
]


def _read_after_s(rng: random.Random, i: int) -> float:
    """When the client reads the i-th read notification, after it was made: just before
    a step's due time for a quarter each, anywhere in the first 5 s for the rest."""
    if i % 4 == 0:
        return PUSH_S - rng.uniform(0.001, 0.050)
    if i % 4 == 1:
        return EMAIL_S - rng.uniform(0.001, 0.050)
    return rng.uniform(0.1, 5.0)


async def _steps(dsn: str, tenant: str, timeout_s: float = 120) -> list[dict[str, Any]]:
    """Every step of the tenant, once none is pending."""
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout_s
        query = "SELECT count(*) FROM escalations WHERE tenant = $1 AND status = 'pending'"
        while await conn.fetchval(query, tenant) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        rows = await conn.fetch("SELECT * FROM escalations WHERE tenant = $1", tenant)
        return [{**row, "notification": orjson.loads(row["notification"])} for row in rows]
    finally:
        await conn.close()


def _receipt(row: dict[str, Any]) -> str:
    """The id the sink reports for the step's e-mail (its delivery id, the Message-ID) or
    push (its `Topic`, from the notification's collapse key)."""
    if row["channel"] == EMAIL:
        step = send_of(SimpleNamespace(**row))  # type: ignore[arg-type]
        return delivery_id(step, row["user_id"], EMAIL)
    topic = push_topic({"collapse_key": row["notification"]["collapse_key"]})
    assert topic is not None
    return topic


async def escalations(hub: BenchHub) -> dict[str, float]:
    tenant = f"bench-{uuid.uuid4().hex[:6]}"
    users = [f"u{i}" for i in range(USERS)]
    dsn = str(hub.settings.database_url).replace("+asyncpg", "")
    smtp_port, push_port = _free_port(), _free_port()
    rng = random.Random(41)
    chosen = set(rng.sample(range(NOTIFICATIONS), NOTIFICATIONS // 2))
    read_at: dict[str, float] = {}  # notification id -> when the hub marked it read
    async with Sink.run("smtp", str(smtp_port)) as mail, Sink.run("push", str(push_port)) as push:
        await hub.restart(env={"NOTIFYHUB_DELIVERIES__SMTP_PORT": str(smtp_port)})
        await add_addresses(dsn, tenant, users)
        await subscribe(hub, push_port, tenant, users)
        auth = {"Authorization": f"Bearer {hub.publish_key}"}
        readers: list[asyncio.Task[None]] = []
        async with httpx.AsyncClient(base_url=hub.base_url, timeout=60) as client:

            async def read_later(nid: str, user: str, after_s: float) -> None:
                await asyncio.sleep(after_s)  # the client's own timing
                token = hub.tokens.mint_user_token(user, tenant, 600)
                response = await client.patch(
                    f"/v1/me/notifications/{nid}",
                    json={"read": True},
                    headers={"Authorization": f"Bearer {token}"},
                )
                assert response.status_code == 200, response.text
                read_at[nid] = datetime.fromisoformat(response.json()["read_at"]).timestamp()

            async def publish(i: int) -> None:
                body: dict[str, Any] = {
                    "tenant": tenant,
                    "recipients": {"users": [users[i % USERS]]},
                    "title": f"n{i}",
                    "collapse_key": f"n{i}",
                    "escalate": STEPS,
                }
                response = await client.post("/v1/notifications", json=body, headers=auth)
                assert response.status_code == 202, response.text
                if i in chosen:
                    after_s = _read_after_s(rng, len(readers))
                    nid, user = str(response.json()["id"]), users[i % USERS]
                    readers.append(asyncio.create_task(read_later(nid, user, after_s)))

            started = time.monotonic()
            for start in range(0, NOTIFICATIONS, 50):
                await asyncio.gather(*(publish(i) for i in range(start, start + 50)))
            published_s = time.monotonic() - started
            await asyncio.gather(*readers)
        rows = await _steps(dsn, tenant)
        sent = [r for r in rows if r["status"] == "sent"]
        sinks = {EMAIL: mail, "push": push}
        for channel, sink in sinks.items():
            await sink.last([_receipt(r) for r in sent if r["channel"] == channel], 120)
        await asyncio.sleep(1)  # a second copy of anything would be here by now
        offset = time.time() - time.monotonic()  # the sinks' CLOCK_MONOTONIC as wall time
    arrived = [sinks[r["channel"]].arrived[_receipt(r)] + offset for r in sent]
    late = sorted(at - r["due_at"].timestamp() for r, at in zip(sent, arrived, strict=True))
    fired = sorted((r["done_at"] - r["due_at"]).total_seconds() for r in rows)
    read_before = [
        r for r in sent if read_at.get(r["notification_id"], 1e12) < r["due_at"].timestamp()
    ]
    return {
        "publish s": published_s,
        "steps": float(len(rows)),
        "sent": float(len(sent)),
        "cancelled": float(sum(1 for r in rows if r["status"] == "cancelled")),
        "sent though read before due": float(len(read_before)),
        "received twice": float(mail.repeated + push.repeated),
        "wrong sends": float(len(read_before) + mail.repeated + push.repeated),
        "p50 fired late s": quantile(fired, 0.5),
        "max fired late s": fired[-1],
        "p50 late s": quantile(late, 0.5),
        "p99 late s": quantile(late, 0.99),
        "max late s": late[-1],
    }


SCENARIO = (
    f"escalation: {NOTIFICATIONS:,} notifications, a push at {PUSH_S} s and an e-mail at "
    f"{EMAIL_S} s, half read"
)
scenarios.ALL += [(SCENARIO, escalations)]
