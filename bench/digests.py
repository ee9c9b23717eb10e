"""Digests (issue 41 item 3): N users each get a burst of 20 notifications under one
digest key; each must get exactly one digest e-mail with all 20, sent soon after its
window closes, and one thread item in the inbox with `activity_count` 20.

The hub (its own channel and digest workers, real clock) e-mails an aiosmtpd process
(bench/sinks.py). Lateness: a digest's e-mail arriving at the sink minus its window's
end (`digests.due_at`), wall clock on one machine."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import TYPE_CHECKING, Any, NamedTuple

import asyncpg
import httpx

from bench import scenarios
from bench.clients import add_addresses, quantile
from bench.delivery_targets import Sink, _free_port

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

BURST = 20
SAMPLE = 20
"""Users whose inbox is checked for the one thread item."""


class Sent(NamedTuple):
    """A digest e-mail in the outbox."""

    id: str
    user: str
    items: int
    due: float
    """Its window's end, epoch seconds."""
    flushed_s: float
    """From that end to the worker's flush (the digest closed and its delivery added to
    the outbox), by the worker's clock at the start of its transaction."""


async def _sent(dsn: str, tenant: str) -> list[Sent]:
    """Each digest e-mail of `tenant`."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT d.id, d.payload->>'user' AS u, (d.payload->'digest'->>'count')::int AS n, "
            "extract(epoch FROM g.due_at) AS due, "
            "extract(epoch FROM g.closed_at - g.due_at) AS flushed "
            "FROM deliveries d JOIN digests g ON g.tenant = d.tenant "
            "AND g.id = d.payload->'notification'->>'id' "
            "WHERE d.tenant = $1 AND d.definition = 'email'",
            tenant,
        )
        return [Sent(r["id"], r["u"], r["n"], float(r["due"]), float(r["flushed"])) for r in rows]
    finally:
        await conn.close()


async def _wait_for(dsn: str, tenant: str, count: int, deadline: float) -> None:
    """Until `tenant` has `count` digest e-mails in the outbox (or `deadline` passes),
    counted each second: a count reads no payload, so the poll takes a few milliseconds
    of PostgreSQL while the hub flushes. Reading every e-mail's payload each second (as
    `_sent` does, once, at the end) took 80-240 ms of it, beside the hub."""
    conn = await asyncpg.connect(dsn)
    try:
        query = "SELECT count(*) FROM deliveries WHERE tenant = $1 AND definition = 'email'"
        while await conn.fetchval(query, tenant) < count and time.monotonic() < deadline:
            await asyncio.sleep(1)
    finally:
        await conn.close()


async def _threads(hub: BenchHub, tenant: str, users: list[str]) -> list[int]:
    """The sampled users' thread items' activity counts (one item each, or a -1)."""
    counts = []
    async with httpx.AsyncClient(base_url=hub.base_url, timeout=30) as client:
        for user in users:
            token = hub.tokens.mint_user_token(user, tenant, 600)
            response = await client.get(
                "/v1/me/notifications", headers={"Authorization": f"Bearer {token}"}
            )
            items = response.json()["items"]
            counts.append(items[0]["thread"]["activity_count"] if len(items) == 1 else -1)
    return counts


USERS = int(os.environ.get("NOTIFYHUB_BENCH_DIGEST_USERS", "10000"))
WINDOW_S = int(os.environ.get("NOTIFYHUB_BENCH_DIGEST_WINDOW_S", "300"))
"""A smaller run first: `NOTIFYHUB_BENCH_DIGEST_USERS=200 python -m bench --only digests`.
The window (300 s) outlasts the burst's expansion at 10,000 users (about 150 s on the
2-core bench machine): a shorter one closes some users' digests before their last
notifications are expanded, and measures the expansion's backlog, not the flush."""


async def digests(hub: BenchHub, users: int = USERS, window_s: int = WINDOW_S) -> dict[str, float]:
    """`users` users x BURST notifications under one key, a fixed window of `window_s`."""
    tenant = f"bench-{uuid.uuid4().hex[:6]}"
    names = [f"u{i}" for i in range(users)]
    dsn = str(hub.settings.database_url).replace("+asyncpg", "")
    port = _free_port()
    async with Sink.run("smtp", str(port)) as sink:
        await hub.restart(env={"NOTIFYHUB_DELIVERIES__SMTP_PORT": str(port)})
        await add_addresses(dsn, tenant, names)
        auth = {"Authorization": f"Bearer {hub.publish_key}"}
        digest = {"key": "bench", "window_s": window_s, "max_items": 50}
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=hub.base_url, headers=auth, timeout=60) as client:
            for n in range(BURST):
                body: dict[str, Any] = {
                    "tenant": tenant,
                    "recipients": {"users": names},
                    "title": f"comment {n}",
                    "actor": {"id": f"a{n % 4}"},
                    "channels": ["inbox", "email"],
                    "digest": digest,
                }
                response = await client.post("/v1/notifications", json=body)
                assert response.status_code == 202, response.text
        published_s = time.monotonic() - started
        deadline = time.monotonic() + window_s + published_s + 600
        await _wait_for(dsn, tenant, users, deadline)
        sent = await _sent(dsn, tenant)
        ids = [row.id for row in sent]
        await sink.last(ids, timeout_s=120)
        offset = time.time() - time.monotonic()  # the sink's CLOCK_MONOTONIC as wall time
        late = sorted(sink.arrived[row.id] + offset - row.due for row in sent)
        flushed = sorted(row.flushed_s for row in sent)
    per_user = {row.user for row in sent}
    threads = await _threads(hub, tenant, names[:: max(1, users // SAMPLE)][:SAMPLE])
    return {
        "users": float(users),
        "digest e-mails": float(len(sent)),
        "users with one e-mail": float(len(per_user)) if len(per_user) == len(sent) else -1.0,
        "e-mails without all 20": float(sum(1 for row in sent if row.items != BURST)),
        "sampled threads not 20": float(sum(1 for c in threads if c != BURST)),
        "publish s": published_s,
        "windows closing over s": max(row.due for row in sent) - min(row.due for row in sent),
        "p50 flushed s": quantile(flushed, 0.5),
        "max flushed s": flushed[-1],
        "p50 late s": quantile(late, 0.5),
        "p99 late s": quantile(late, 0.99),
        "max late s": late[-1],
    }


scenarios.ALL += [(f"digests: 10,000 users x {BURST} notifications under one key", digests)]
