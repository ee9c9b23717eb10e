"""The delayed queue and scheduled notifications with keys bound to two tenants.

A queue is one (tenant, name): tenant A's key never reads, cancels, consumes, acks or
restores tenant B's messages (an id of B answers 404 exactly like a missing one), and a
key naming the other tenant gets 403. Each test uses tenants of its own: the run's
database is shared, and every hub restores what it finds there.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from ulid import ULID

from notifyhub.db.models import DelayedMessage
from notifyhub.services.delayed import payload
from notifyhub.services.ingest import SCHEDULED_QUEUE
from notifyhub.settings import Settings
from notifyhub.store.delayed import DelayedStore
from notifyhub.store.keys import Keys, Queue


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@dataclass(frozen=True)
class Side:
    """One tenant and its bound keys."""

    tenant: str
    publish: dict[str, str]
    consume: dict[str, str]
    admin: dict[str, str]


async def _side(create_key: Any, label: str) -> Side:
    tenant = f"{label}-{secrets.token_hex(3)}"
    keys = [await create_key(f"{label}-{s}", s, tenant) for s in ("publish", "consume", "admin")]
    return Side(tenant, *(_auth(k) for k in keys))


@pytest.fixture
async def sides(create_key: Any) -> tuple[Side, Side]:
    return await _side(create_key, "ta"), await _side(create_key, "tb")


async def _push(hub: Any, side: Side, queue: str, delay_ms: int, body: Any = None) -> str:
    fields = {"tenant": side.tenant, "queue": queue, "body": body, "delay_ms": delay_ms}
    response = await hub.client.post("/v1/delayed", json=fields, headers=side.publish)
    assert response.status_code == 201, response.text
    assert response.json()["tenant"] == side.tenant
    return str(response.json()["id"])


async def _status(hub: Any, side: Side, message_id: str) -> str:
    response = await hub.client.get(
        f"/v1/delayed/{message_id}", params={"tenant": side.tenant}, headers=side.publish
    )
    assert response.status_code == 200, response.text
    assert response.json()["tenant"] == side.tenant
    return str(response.json()["status"])


async def _take(hub: Any, side: Side, queue: str) -> list[dict[str, Any]]:
    response = await hub.client.get(
        f"/v1/queues/{queue}/messages", params={"tenant": side.tenant}, headers=side.consume
    )
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def _as_missing(hub: Any, method: str, path: str, side: Side, message_id: str) -> None:
    """`method path` with `side`'s key on another tenant's id: 404, word for word what an
    id nobody has gets."""
    params = {"tenant": side.tenant}
    foreign = await hub.client.request(
        method, path % message_id, params=params, headers=side.publish
    )
    unknown_id = str(ULID())
    unknown = await hub.client.request(
        method, path % unknown_id, params=params, headers=side.publish
    )
    assert foreign.status_code == 404, foreign.text
    assert foreign.headers["content-type"] == "application/problem+json"
    assert foreign.text.replace(message_id, "?") == unknown.text.replace(unknown_id, "?")


async def test_a_cannot_read_or_cancel_bs_scheduled_notification(
    hub: Any, sides: tuple[Side, Side], make_token: Any
) -> None:
    a, b = sides
    user = f"later-{secrets.token_hex(3)}"
    body = {"tenant": b.tenant, "recipients": {"users": [user]}, "title": "B only", "delay": 1}
    sent = await hub.client.post("/v1/notifications", json=body, headers=b.publish)
    assert sent.status_code == 202, sent.text
    nid = sent.json()["id"]

    for method in ("GET", "DELETE"):
        await _as_missing(hub, method, "/v1/delayed/%s", a, nid)
    await _as_missing(hub, "DELETE", "/v1/notifications/%s", a, nid)  # recall
    shown = await hub.client.get(
        f"/v1/delayed/{nid}", params={"tenant": b.tenant}, headers=b.publish
    )
    assert shown.json()["queue"] == "notifyhub.scheduled"
    assert shown.json()["body"]["draft"]["title"] == "B only"

    async with asyncio.timeout(20):  # still delivered at its time, to B's user
        while await _status(hub, b, nid) != "consumed":
            await asyncio.sleep(0.1)
    inbox = await hub.client.get(
        "/v1/me/notifications", headers=_auth(make_token(user, tenant=b.tenant))
    )
    assert [n["id"] for n in inbox.json()["items"]] == [nid]


async def test_a_cannot_read_or_cancel_bs_delayed_message(
    hub: Any, sides: tuple[Side, Side]
) -> None:
    a, b = sides
    message_id = await _push(hub, b, "orders", 60_000, {"secret": "B"})
    for method in ("GET", "DELETE"):
        await _as_missing(hub, method, "/v1/delayed/%s", a, message_id)
    assert await _status(hub, b, message_id) == "delayed"
    cancelled = await hub.client.delete(
        f"/v1/delayed/{message_id}", params={"tenant": b.tenant}, headers=b.publish
    )
    assert cancelled.status_code == 204
    assert await _status(hub, b, message_id) == "cancelled"


async def test_consumers_take_only_their_tenants_queue(hub: Any, sides: tuple[Side, Side]) -> None:
    a, b = sides
    queue = f"t-{secrets.token_hex(3)}"
    mine, theirs = await _push(hub, a, queue, 0, "A"), await _push(hub, b, queue, 0, "B")
    await hub.app_state["delayed"].move()

    [taken_a] = await _take(hub, a, queue)
    assert (taken_a["id"], taken_a["tenant"], taken_a["body"]) == (mine, a.tenant, "A")
    assert await _take(hub, a, queue) == []
    [taken_b] = await _take(hub, b, queue)
    assert (taken_b["id"], taken_b["tenant"], taken_b["body"]) == (theirs, b.tenant, "B")

    # B's receipt on A's queue: unknown there, and B's message stays reserved.
    path = f"/v1/queues/{queue}/messages/{theirs}/ack"
    receipt = {"receipt": taken_b["receipt"]}
    foreign = await hub.client.post(
        path, json=receipt, params={"tenant": a.tenant}, headers=a.consume
    )
    assert foreign.status_code == 404, foreign.text
    assert await _status(hub, b, theirs) == "reserved"
    own = await hub.client.post(path, json=receipt, params={"tenant": b.tenant}, headers=b.consume)
    assert own.status_code == 204
    assert await _status(hub, b, theirs) == "consumed"


async def test_a_bound_key_naming_the_other_tenant_is_refused(
    hub: Any, sides: tuple[Side, Side]
) -> None:
    a, b = sides
    message_id = await _push(hub, b, "orders", 60_000)
    other = {"tenant": b.tenant}
    calls = [
        (
            "POST",
            "/v1/delayed",
            {"json": {"tenant": b.tenant, "topic": "x", "delay_ms": 1}},
            a.publish,
        ),
        ("GET", f"/v1/delayed/{message_id}", {"params": other}, a.publish),
        ("DELETE", f"/v1/delayed/{message_id}", {"params": other}, a.publish),
        ("GET", "/v1/queues/orders/messages", {"params": other}, a.consume),
        (
            "POST",
            f"/v1/queues/orders/messages/{message_id}/ack",
            {"params": other, "json": {"receipt": "r"}},
            a.consume,
        ),
        ("POST", "/v1/delayed/restore", {"params": other}, a.admin),
        ("POST", f"/v1/delayed/{message_id}/restore", {"params": other}, a.admin),
        # no tenant named: "default", which is not A's either
        ("GET", f"/v1/delayed/{message_id}", {}, a.publish),
        ("POST", "/v1/delayed", {"json": {"queue": "x", "delay_ms": 1}}, a.publish),
    ]
    for method, path, extra, headers in calls:
        response = await hub.client.request(method, path, headers=headers, **extra)
        assert response.status_code == 403, (method, path, response.text)
        assert response.headers["content-type"] == "application/problem+json"
    assert await _status(hub, b, message_id) == "delayed"


async def _lose_delayed_keys(redis: Redis, settings: Settings) -> None:
    """Redis loses the delayed queue (not the epoch marker: no automatic rebuild)."""
    lost = [key async for key in redis.scan_iter(match=f"{settings.redis_prefix}dq*", count=1000)]
    if lost:
        await redis.unlink(*lost)


async def _restore(hub: Any, side: Side, path: str = "/v1/delayed/restore") -> httpx.Response:
    return await hub.client.post(path, params={"expired": "true"}, headers=side.admin)


async def test_restore_keeps_tenants_apart(
    hub: Any, sides: tuple[Side, Side], redis: Redis, settings: Settings
) -> None:
    a, b = sides
    queue = f"r-{secrets.token_hex(3)}"
    mine, theirs = await _push(hub, a, queue, 0, "A"), await _push(hub, b, queue, 0, "B")
    await _lose_delayed_keys(redis, settings)

    # A's bound admin key: without `tenant`, A's messages only, into A's queue.
    restored = await _restore(hub, a)
    assert restored.json() == {"restored": 1}
    one = await hub.client.post(
        f"/v1/delayed/{theirs}/restore", params={"tenant": a.tenant}, headers=a.admin
    )
    assert one.status_code == 404
    store = DelayedStore(redis, Keys(settings.redis_prefix), settings.delayed.sets)
    assert not await store.exists(theirs)
    assert await store.status(mine, Queue(b.tenant, queue)) is None
    await hub.app_state["delayed"].move()
    assert [m["id"] for m in await _take(hub, a, queue)] == [mine]
    assert await _take(hub, b, queue) == []

    # B's, through its own key and the one-message route, into B's queue.
    again = await hub.client.post(
        f"/v1/delayed/{theirs}/restore", params={"tenant": b.tenant}, headers=b.admin
    )
    assert again.json() == {"restored": 1}
    await hub.app_state["delayed"].move()
    assert await _take(hub, a, queue) == []
    [taken] = await _take(hub, b, queue)
    assert (taken["id"], taken["tenant"]) == (theirs, b.tenant)


async def test_a_plain_restore_requeues_every_message_not_reserved_due_or_not(
    hub: Any, sides: tuple[Side, Side], redis: Redis, settings: Settings
) -> None:
    """Without `expired=true` a restore skipped messages already due (ready, never
    taken): `{"restored": 1}` for the future one, nothing for consumers, the due one
    `delayed` by the row though Redis held nothing. Now only what the log last shows
    reserved waits for `expired=true`; nothing consumed or held comes back twice."""
    a, _ = sides
    queue = f"plain-{secrets.token_hex(3)}"
    mover = hub.app_state["delayed"]
    done = await _push(hub, a, queue, 0, "consumed")
    await mover.move()
    [taken] = await _take(hub, a, queue)
    acked = await hub.client.post(
        f"/v1/queues/{queue}/messages/{done}/ack",
        params={"tenant": a.tenant},
        json={"receipt": taken["receipt"]},
        headers=a.consume,
    )
    assert acked.status_code == 204
    held = await _push(hub, a, queue, 0, "held")
    await mover.move()
    assert [m["id"] for m in await _take(hub, a, queue)] == [held]  # reserved, never acked
    due = await _push(hub, a, queue, 0, "due")
    later = await _push(hub, a, queue, 3_600_000, "later")
    await mover.move()
    assert await _status(hub, a, due) == "ready"
    await mover.transitions.flush()  # the log has what Redis did
    await _lose_delayed_keys(redis, settings)

    plain = await hub.client.post("/v1/delayed/restore", headers=a.admin)
    assert plain.json() == {"restored": 2}  # due and later; not held, not done
    store = DelayedStore(redis, Keys(settings.redis_prefix), settings.delayed.sets)
    assert [await store.exists(i) for i in (done, held, due, later)] == [False, False, True, True]
    await mover.move()
    assert [m["id"] for m in await _take(hub, a, queue)] == [due]
    assert (await _restore(hub, a)).json() == {"restored": 1}  # expired=true: held too
    await mover.move()
    assert [m["id"] for m in await _take(hub, a, queue)] == [held]
    assert await _take(hub, a, queue) == []
    assert await _status(hub, a, later) == "delayed"


async def _queue_as_layout_2(
    redis: Redis, settings: Settings, row: DelayedMessage, message: dict[str, Any]
) -> None:
    """What a hub before queues had a tenant wrote: bare-name keys (tenant "default"'s
    queue today), no `:q` on the id, no tenant in the message."""
    keys = Keys(settings.redis_prefix)
    k = keys.delayed(keys.delayed_set(row.id, settings.delayed.sets))
    await redis.hset(k.msg, row.id, orjson.dumps(message))
    await redis.hset(
        k.state, mapping={row.id: "delayed||0", f"{row.id}:p": 0, f"{row.id}:t": 30_000}
    )
    await redis.zadd(k.due(row.queue), {row.id: int(row.due_at.timestamp() * 1000) * 10 + 9})
    await redis.sadd(k.queues, row.queue)


async def test_a_layout_2_scheduled_notification_reaches_its_own_tenant(
    hub: Any,
    sides: tuple[Side, Side],
    redis: Redis,
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    make_token: Any,
) -> None:
    """Queued by an older hub in the one hub-wide scheduled queue (now tenant "default"'s)
    and filed under B by migration 0007: delivered to B's user, acked, status consumed."""
    _, b = sides
    user = f"legacy-{secrets.token_hex(3)}"
    body = {
        "draft": {"tenant": b.tenant, "title": "from layout 2"},
        "recipients": {"users": [user], "groups": [], "topics": []},
    }
    row = DelayedMessage(
        id=str(ULID()),
        tenant=b.tenant,
        queue=SCHEDULED_QUEUE,
        body=body,
        priority=0,
        ttl_ms=30_000,
        due_at=datetime.now(UTC) - timedelta(seconds=1),
        status="delayed",
    )
    async with sessionmaker.begin() as session:
        session.add(row)
    message = {k: v for k, v in orjson.loads(payload(row)).items() if k != "tenant"}
    await _queue_as_layout_2(redis, settings, row, message)

    async with asyncio.timeout(20):
        while await _status(hub, b, row.id) != "consumed":
            await asyncio.sleep(0.1)
    inbox = await hub.client.get(
        "/v1/me/notifications", headers=_auth(make_token(user, tenant=b.tenant))
    )
    assert [n["id"] for n in inbox.json()["items"]] == [row.id]
