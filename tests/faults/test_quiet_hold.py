"""E-mails held for quiet hours survive a hub kill -9 and a durable-mode Redis FLUSHALL
during the window (issue 41 item 2's acceptance).

200 users with addresses; the tenant's quiet-hours default (UTC) ends at a whole minute
10-20 s after a publish with `channels: ["email"]` to all of them, so the channel worker
creates each user's e-mail as an outbox delivery due at the window's end (a PostgreSQL
row). During the window the fault strikes; after it every user must get their e-mail
exactly once (a local aiosmtpd counts arrivals by `Message-ID`, per recipient), none
before the window's end. Schedules are whole minutes of real time, so the test waits for
the right second of the wall clock (the hub is another process: no controlled clock).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from support.faultenv import FaultEnv
from support.history import History, Verdict
from support.smtp import Smtp

pytestmark = pytest.mark.slow

USERS = 200
LEAD_S = (10.0, 20.0)
"""The window ends this long after the publish (a whole minute: the test waits for it)."""
ARRIVE_S = 60.0
"""Every held e-mail must have arrived this long after the window's end."""


@dataclass(frozen=True)
class _Fault:
    name: str
    inject: Callable[[FaultEnv], Awaitable[None]]
    durability: str = "redis"


async def _kill_and_restart(env: FaultEnv) -> None:
    await env.hub.kill()
    await env.hub.start()


async def _flushall(env: FaultEnv) -> None:
    client = env.redis.client()
    try:
        client.flushall()
    finally:
        client.close()


FAULTS = [
    _Fault("quiet hours: hub kill -9 while 200 e-mails are held", _kill_and_restart),
    _Fault(
        "quiet hours, durable inbox: Redis FLUSHALL while 200 e-mails are held",
        _flushall,
        durability="postgres",
    ),
]


def _window_end(now: datetime) -> datetime:
    """The first whole minute at least `LEAD_S[0]` s (plus set-up) after `now`."""
    end = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while (end - now).total_seconds() < LEAD_S[0] + 3:
        end += timedelta(minutes=1)
    return end


async def _hold_until(client: httpx.AsyncClient, admin: str, end: datetime) -> None:
    """The tenant's default: quiet every day from an hour before `end` until `end` (UTC)."""
    start = end - timedelta(hours=1)
    body = {
        "schedule": {"mon-sun": [start.strftime("%H:%M"), end.strftime("%H:%M")]},
        "time_zone": "UTC",
    }
    response = await client.put(
        "/v1/admin/quiet-defaults",
        params={"tenant": "default"},
        json=body,
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert response.status_code in (200, 201), response.text


async def _addresses(client: httpx.AsyncClient, admin: str, users: list[str]) -> None:
    auth = {"Authorization": f"Bearer {admin}"}

    async def one(user: str) -> None:
        body = {"email": f"{user}@quiet.test"}
        response = await client.put(f"/v1/admin/users/default/{user}", json=body, headers=auth)
        assert response.status_code in (200, 201), response.text

    for n in range(0, len(users), 20):
        await asyncio.gather(*(one(u) for u in users[n : n + 20]))


async def _publish(client: httpx.AsyncClient, key: str, users: list[str]) -> None:
    body = {
        "tenant": "default",
        "recipients": {"users": users},
        "title": "Held for quiet hours",
        "channels": ["inbox", "email"],
    }
    auth = {"Authorization": f"Bearer {key}"}
    response = await client.post("/v1/notifications", json=body, headers=auth)
    assert response.status_code == 202, response.text


async def _publish_in_window(env: FaultEnv, users: list[str]) -> datetime:
    """Addresses, the quiet default and the publish, 10-20 s before the window's end
    (the wall clock's seconds waited for); the window's end (UTC)."""
    async with httpx.AsyncClient(base_url=env.hub.base_url, timeout=10) as client:
        await _addresses(client, env.admin_key, users)
        end = _window_end(datetime.now(UTC))
        await _hold_until(client, env.admin_key, end)
        publish_at = end - timedelta(seconds=sum(LEAD_S) / 2)
        await asyncio.sleep(max(0.0, (publish_at - datetime.now(UTC)).total_seconds()))
        await _publish(client, env.publish_key, users)
    lead = (end - datetime.now(UTC)).total_seconds()
    assert LEAD_S[0] - 1 <= lead <= LEAD_S[1], lead
    return end


async def _held(env: FaultEnv, end: datetime) -> int:
    """E-mail deliveries due at the window's end, not yet sent (rows in PostgreSQL)."""
    assert env.settings.database_url is not None
    conn = await asyncpg.connect(env.settings.database_url.replace("+asyncpg", ""))
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM deliveries WHERE definition = 'email'"
                " AND status = 'pending' AND next_attempt_at = $1",
                end,
            )
        )
    finally:
        await conn.close()


async def _until_held(env: FaultEnv, end: datetime) -> None:
    """The channel worker has held every user's e-mail (before the fault strikes)."""
    async with asyncio.timeout(8):
        while await _held(env, end) < USERS:
            await asyncio.sleep(0.2)


async def _until_arrived(history: History, smtp: Smtp, deadline: float) -> None:
    while time.time() < deadline:
        history.arrivals = smtp.per_recipient()
        if not history.missing():
            return
        await asyncio.sleep(0.1)
    history.arrivals = smtp.per_recipient()


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
async def test_held_emails_arrive_once_after_the_window_despite_the_fault(
    fault: _Fault,
    fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]],
    fault_report: list[Verdict],
    smtp: Smtp,
) -> None:
    extra_env = {
        "NOTIFYHUB_DELIVERIES__SMTP_PORT": str(smtp.port),
        "NOTIFYHUB_DELIVERIES__SMTP_SENDER": "hub@quiet.test",
    }
    users = [f"q{n:03d}" for n in range(USERS)]
    async with fault_env(durability=fault.durability, extra_env=extra_env) as env:
        end = await _publish_in_window(env, users)
        await _until_held(env, end)
        await fault.inject(env)
        assert datetime.now(UTC) < end, "the fault landed after the window"
        history = History("")
        for user in users:
            history.ack(f"{user}@quiet.test")
        await _until_arrived(history, smtp, end.timestamp() + ARRIVE_S)
        log = env.hub.log_path.read_text()
    first_at, last_at = smtp.handler.first_at, smtp.handler.last_at
    early = first_at is not None and first_at < end.timestamp()
    late_s = last_at - end.timestamp()
    history.workload = (
        f"{USERS} held e-mails (per address, by Message-ID); "
        f"{'SOME' if early else 'none'} before the window's end, "
        f"all arrived {late_s:.1f} s after it"
    )
    verdict = history.verdict(fault.name)
    fault_report.append(verdict)
    assert not early, (first_at, end)
    assert verdict.acknowledged == USERS
    assert verdict.lost == 0, verdict.lost_ids[:10]
    assert verdict.duplicated == 0, verdict
    by_id = smtp.count_by("Message-ID")
    assert sum(by_id.values()) == USERS == len(by_id)
    assert late_s <= ARRIVE_S
    assert "Exception in ASGI application" not in log
