"""Digests through a fault while their windows are open (issue 41 item 3's acceptance).

200 users with addresses each get a burst of 5 notifications under one digest key
(`channels: ["inbox", "email"]`, a fixed 30 s window). Once every user's digest is open
(a PostgreSQL row; the channel worker may still be adding items) the fault strikes: the
hub killed -9 and started again, or (durable inbox mode) Redis FLUSHALL. After the
windows close every user must get exactly one digest e-mail listing all 5 items: a
local aiosmtpd keeps every message; each item of each user is counted in the e-mails
that reached that user (by `Message-ID`, every copy), so an item in no e-mail is lost and
one in two e-mails (a second window, or the same e-mail sent twice) is duplicated.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from email.message import Message

import asyncpg
import httpx
import pytest

from faults.test_quiet_hold import _Fault, _flushall, _kill_and_restart
from support.faultenv import FaultEnv
from support.history import History, Verdict
from support.smtp import Smtp

pytestmark = pytest.mark.slow

USERS = 200
BURST = 5
WINDOW_S = 30
DIGEST = {"key": "faults", "window_s": WINDOW_S, "mode": "fixed"}
ARRIVE_S = 30.0
"""Every digest e-mail must have arrived this long after its window's end."""
DOMAIN = "digest.test"


FAULTS = [
    _Fault(f"digests: hub kill -9 while {USERS} windows are open", _kill_and_restart),
    _Fault(
        f"digests, durable inbox: Redis FLUSHALL while {USERS} windows are open",
        _flushall,
        durability="postgres",
    ),
]


async def _addresses(client: httpx.AsyncClient, admin: str, users: list[str]) -> None:
    auth = {"Authorization": f"Bearer {admin}"}

    async def one(user: str) -> None:
        body = {"email": f"{user}@{DOMAIN}"}
        response = await client.put(f"/v1/admin/users/default/{user}", json=body, headers=auth)
        assert response.status_code in (200, 201), response.text

    for n in range(0, len(users), 20):
        await asyncio.gather(*(one(u) for u in users[n : n + 20]))


async def _burst(env: FaultEnv, users: list[str]) -> None:
    """Addresses, then BURST notifications to every user under the digest key."""
    async with httpx.AsyncClient(base_url=env.hub.base_url, timeout=30) as client:
        await _addresses(client, env.admin_key, users)
        auth = {"Authorization": f"Bearer {env.publish_key}"}
        for n in range(BURST):
            body = {
                "tenant": "default",
                "recipients": {"users": users},
                "title": f"comment {n}",
                "channels": ["inbox", "email"],
                "digest": DIGEST,
            }
            response = await client.post("/v1/notifications", json=body, headers=auth)
            assert response.status_code == 202, response.text


async def _digests(env: FaultEnv) -> list[asyncpg.Record]:
    """Every digest row: state, items counted, window's end (epoch s)."""
    assert env.settings.database_url is not None
    conn = await asyncpg.connect(env.settings.database_url.replace("+asyncpg", ""))
    try:
        return list(
            await conn.fetch(
                "SELECT user_id, state, item_count, extract(epoch FROM due_at)::float8 AS due"
                " FROM digests"
            )
        )
    finally:
        await conn.close()


async def _until_open(env: FaultEnv) -> list[asyncpg.Record]:
    """Every user's digest is open (its items may still be coming in)."""
    async with asyncio.timeout(WINDOW_S):
        while len(rows := await _digests(env)) < USERS:
            await asyncio.sleep(0.1)
    return rows


def _items(message: Message) -> list[str]:
    """The titles a digest e-mail lists (its plain-text body's `- title` lines)."""
    payload = message.get_payload(decode=True)
    assert isinstance(payload, bytes), message
    lines = payload.decode().splitlines()
    return [line[2:] for line in lines if line.startswith("- ")]


def _collect(smtp: Smtp, history: History) -> Counter[str]:
    """Each user's item arrivals (into `history`) and e-mails (returned)."""
    per_user: Counter[str] = Counter()
    arrivals: Counter[str] = Counter()
    for message in smtp.received:
        user = str(message["To"]).removesuffix(f"@{DOMAIN}")
        per_user[user] += 1
        for title in _items(message):
            arrivals[f"{user}/{title}"] += 1
    history.arrivals = arrivals
    return per_user


async def _until_arrived(
    smtp: Smtp, history: History, deadline: float
) -> tuple[Counter[str], float]:
    """Each user's e-mails once all items arrived (or at `deadline`), and when that was."""
    while time.time() < deadline:
        if len(_collect(smtp, history)) == USERS and not history.missing():
            break
        await asyncio.sleep(0.1)
    arrived_at = time.time()
    await asyncio.sleep(1.0)  # a duplicate would arrive by now
    return _collect(smtp, history), arrived_at


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
async def test_each_user_gets_one_digest_with_every_item_despite_the_fault(
    fault: _Fault,
    fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]],
    fault_report: list[Verdict],
    smtp: Smtp,
) -> None:
    extra_env = {
        "NOTIFYHUB_DELIVERIES__SMTP_PORT": str(smtp.port),
        "NOTIFYHUB_DELIVERIES__SMTP_SENDER": f"hub@{DOMAIN}",
    }
    users = [f"d{n:03d}" for n in range(USERS)]
    history = History("")
    for user in users:
        for n in range(BURST):
            history.ack(f"{user}/comment {n}")
    async with fault_env(durability=fault.durability, extra_env=extra_env) as env:
        await _burst(env, users)
        opened = await _until_open(env)
        items_in = sum(r["item_count"] for r in opened)
        struck_at = time.time()
        await fault.inject(env)
        assert struck_at < min(r["due"] for r in opened), "the fault landed after a window"
        assert not smtp.received, "a digest e-mail before its window closed"
        last_due = max(r["due"] for r in opened)
        per_user, arrived_at = await _until_arrived(smtp, history, last_due + ARRIVE_S)
        digests = await _digests(env)
        log = env.hub.log_path.read_text()
    late_s = arrived_at - last_due
    history.workload = (
        f"{USERS} users x {BURST} under one digest key (items per user's e-mails, by "
        f"Message-ID); struck with {items_in} items in; {sum(per_user.values())} e-mails, "
        f"all arrived within {late_s:.1f} s after the windows closed"
    )
    verdict = history.verdict(fault.name)
    fault_report.append(verdict)
    assert verdict.lost == 0, verdict.lost_ids[:10]
    assert verdict.duplicated == 0, verdict
    assert per_user == Counter({user: 1 for user in users})
    assert len(smtp.count_by("Message-ID")) == USERS
    assert sorted((r["user_id"], r["state"], r["item_count"]) for r in digests) == [
        (user, "sent", BURST) for user in users
    ]
    assert "Exception in ASGI application" not in log
