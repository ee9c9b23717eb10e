"""The delayed queue's retention: a message finished (consumed or cancelled) more than
`delayed.retention_s` ago leaves Redis and PostgreSQL, in batches, every tenant's; one
not finished, or finished more recently, stays. Each test makes its hub with a retention
loop that passes once at start-up and then only when the test steps it (`run_once`),
and backdates `finished_at` instead of waiting out a retention.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from redis.asyncio import Redis
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from ulid import ULID

from notifyhub.db.base import Base
from notifyhub.db.engine import create_engine
from notifyhub.db.migrate import alembic_config
from notifyhub.services.delayed import NewMessage
from notifyhub.settings import Settings
from support.delayed import DelayedCalls

Maker = async_sessionmaker[AsyncSession]
StartHub = Callable[[Settings], AbstractAsyncContextManager[Any]]
CreateKey = Callable[..., Awaitable[str]]
DAY_S = 86400.0


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _kept_for(settings: Settings, days: float = 7, batch: int = 500) -> Settings:
    """`settings` whose retention loop passes at start-up, then only when stepped."""
    delayed = settings.delayed.model_copy(
        update={
            "retention_s": days * DAY_S,
            "retention_batch": batch,
            "retention_interval_s": 3600.0,
        }
    )
    return settings.model_copy(update={"delayed": delayed})


@dataclass(frozen=True)
class Side:
    """One tenant and its bound keys."""

    tenant: str
    publish: dict[str, str]
    consume: dict[str, str]
    admin: dict[str, str]


async def _side(create_key: CreateKey, label: str) -> Side:
    tenant = f"{label}-{secrets.token_hex(3)}"
    keys = [await create_key(f"{label}-{s}", s, tenant) for s in ("publish", "consume", "admin")]
    return Side(tenant, *(_auth(k) for k in keys))


async def _push(hub: Any, side: Side, queue: str, delay_ms: int) -> str:
    fields = {"tenant": side.tenant, "queue": queue, "body": {"q": queue}, "delay_ms": delay_ms}
    response = await hub.client.post("/v1/delayed", json=fields, headers=side.publish)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _cancel(hub: Any, side: Side, message_id: str) -> int:
    response = await hub.client.delete(
        f"/v1/delayed/{message_id}", params={"tenant": side.tenant}, headers=side.publish
    )
    return int(response.status_code)


async def _get(hub: Any, side: Side, message_id: str) -> Any:
    return await hub.client.get(
        f"/v1/delayed/{message_id}", params={"tenant": side.tenant}, headers=side.publish
    )


async def _sweep(hub: Any) -> int:
    """One pass of the hub's retention loop (`DelayedRetention.run_once`)."""
    return int(await hub.app_state["runner"].loop("delayed-retention").step())


async def _finished_days_ago(maker: Maker, days: dict[str, float]) -> None:
    """Backdate each message's finish by its number of days."""
    async with maker.begin() as session:
        for message_id, ago in days.items():
            await session.execute(
                text(
                    "UPDATE delayed_messages SET finished_at = now() - make_interval(secs => :s)"
                    " WHERE id = :id"
                ),
                {"s": ago * DAY_S, "id": message_id},
            )


async def _rows(maker: Maker, ids: Sequence[str]) -> dict[str, tuple[str, str, int]]:
    """id -> (tenant, status, transitions logged) of the rows PostgreSQL still has."""
    async with maker() as session:
        found = await session.execute(
            text(
                "SELECT m.id, m.tenant, m.status,"
                " (SELECT count(*) FROM delayed_transitions t WHERE t.message_id = m.id)"
                " FROM delayed_messages m WHERE m.id = ANY(:ids)"
            ),
            {"ids": list(ids)},
        )
        return {row[0]: (row[1], row[2], row[3]) for row in found}


async def _orphan_transitions(maker: Maker, ids: Sequence[str]) -> int:
    async with maker() as session:
        found = await session.scalar(
            text("SELECT count(*) FROM delayed_transitions WHERE message_id = ANY(:ids)"),
            {"ids": list(ids)},
        )
        return int(found or 0)


async def _in_redis(hub: Any, redis: Redis, message_id: str) -> list[Any]:
    """What Redis keeps of the message: its state, queue, priority, ttl and body."""
    keys = hub.app_state["delayed"]._store._set(message_id)
    fields = [message_id, f"{message_id}:q", f"{message_id}:p", f"{message_id}:t"]
    return [*await redis.hmget(keys.state, fields), await redis.hget(keys.msg, message_id)]


async def _removed_total(hub: Any) -> float:
    text_ = (await hub.client.get("/metrics")).text
    [line] = [x for x in text_.splitlines() if x.startswith("notifyhub_delayed_removed_total ")]
    return float(line.rsplit(" ", 1)[1])


async def test_finished_messages_past_retention_leave_redis_and_postgresql(
    start_hub: StartHub,
    settings: Settings,
    sessionmaker: Maker,
    create_key: CreateKey,
    redis: Redis,
) -> None:
    async with start_hub(_kept_for(settings)) as hub:
        a, b = await _side(create_key, "ra"), await _side(create_key, "rb")
        queue = f"r-{secrets.token_hex(3)}"
        consumed = await _push(hub, a, queue, 0)
        await hub.app_state["delayed"].move()
        [taken] = (
            await hub.client.get(
                f"/v1/queues/{queue}/messages", params={"tenant": a.tenant}, headers=a.consume
            )
        ).json()["messages"]
        ack_path = f"/v1/queues/{queue}/messages/{consumed}/ack"
        receipt = {"receipt": taken["receipt"]}
        acked = await hub.client.post(
            ack_path, json=receipt, params={"tenant": a.tenant}, headers=a.consume
        )
        assert acked.status_code == 204, acked.text
        cancelled, recent, waiting = [await _push(hub, a, queue, 60_000) for _ in range(3)]
        theirs_cancelled, theirs_waiting = [await _push(hub, b, queue, 60_000) for _ in range(2)]
        for side, message_id in ((a, cancelled), (a, recent), (b, theirs_cancelled)):
            assert await _cancel(hub, side, message_id) == 204
        await hub.app_state["delayed"].transitions.flush()
        old = [consumed, cancelled, theirs_cancelled]
        kept = [recent, waiting, theirs_waiting]
        # `waiting` and `theirs_waiting` are not finished: whatever their finished_at says
        await _finished_days_ago(
            sessionmaker, {**dict.fromkeys(old, 8), recent: 6, waiting: 30, theirs_waiting: 30}
        )
        assert all(count > 0 for _t, _s, count in (await _rows(sessionmaker, old)).values())
        before = await _removed_total(hub)

        assert await _sweep(hub) == 3
        assert await _sweep(hub) == 0

        assert await _rows(sessionmaker, old) == {}
        assert await _orphan_transitions(sessionmaker, old) == 0
        for message_id in old:
            assert await _in_redis(hub, redis, message_id) == [None] * 5
        rows = await _rows(sessionmaker, kept)
        assert {i: r[:2] for i, r in rows.items()} == {
            recent: (a.tenant, "cancelled"),
            waiting: (a.tenant, "delayed"),
            theirs_waiting: (b.tenant, "delayed"),
        }
        for message_id in kept:
            assert (await _in_redis(hub, redis, message_id))[0] is not None
        assert await _removed_total(hub) - before == 3

        # Removed: every endpoint answers as for an id nobody has.
        for side, message_id in ((a, consumed), (a, cancelled), (b, theirs_cancelled)):
            assert (await _get(hub, side, message_id)).status_code == 404
            assert await _cancel(hub, side, message_id) == 404
            restore = await hub.client.post(
                f"/v1/delayed/{message_id}/restore",
                params={"tenant": side.tenant},
                headers=side.admin,
            )
            assert restore.status_code == 404, restore.text
        late_ack = await hub.client.post(
            ack_path, json=receipt, params={"tenant": a.tenant}, headers=a.consume
        )
        assert late_ack.status_code == 404
        # Kept: shown to their own tenant only.
        assert (await _get(hub, a, recent)).json()["status"] == "cancelled"
        assert (await _get(hub, a, waiting)).json()["status"] == "delayed"
        shown = await _get(hub, b, theirs_waiting)
        assert (shown.json()["tenant"], shown.json()["status"]) == (b.tenant, "delayed")
        assert (await _get(hub, a, theirs_waiting)).status_code == 404
        restored = await hub.client.post(
            "/v1/delayed/restore", params={"tenant": a.tenant}, headers=a.admin
        )
        assert restored.json() == {"restored": 0}  # nothing removed comes back


async def test_a_pass_removes_one_batch_oldest_first(
    start_hub: StartHub,
    settings: Settings,
    sessionmaker: Maker,
    create_key: CreateKey,
    redis: Redis,
) -> None:
    async with start_hub(_kept_for(settings, days=50, batch=2)) as hub:
        side = await _side(create_key, "rc")
        ids = [await _push(hub, side, "batches", 60_000) for _ in range(5)]
        for message_id in ids:
            assert await _cancel(hub, side, message_id) == 204
        await _finished_days_ago(sessionmaker, {m: 100 + 10 * i for i, m in enumerate(ids)})
        loop = hub.app_state["runner"].loop("delayed-retention")

        left = []
        for expected in (2, 2, 1, 0):
            assert await _sweep(hub) == expected
            left.append(sorted(await _rows(sessionmaker, ids)))
            assert loop.pause_s() == (1.0 if expected == 2 else 3600.0)  # full: again soon
        oldest_first = ids[::-1]
        assert left == [sorted(oldest_first[2:]), sorted(oldest_first[4:]), [], []]
        for message_id in ids:
            assert await _in_redis(hub, redis, message_id) == [None] * 5


async def test_one_redis_holds_unfinished_is_kept_and_its_retention_starts_again(
    start_hub: StartHub,
    settings: Settings,
    sessionmaker: Maker,
    create_key: CreateKey,
    redis: Redis,
) -> None:
    """PostgreSQL says cancelled, Redis says waiting (Redis lost the cancel): nothing is
    removed, and the row's finish counts from now, so it does not come first in every
    later pass."""
    async with start_hub(_kept_for(settings)) as hub:
        side = await _side(create_key, "rd")
        message_id = await _push(hub, side, "lost-finish", 60_000)
        async with sessionmaker.begin() as session:
            await session.execute(
                text("UPDATE delayed_messages SET status = 'cancelled' WHERE id = :id"),
                {"id": message_id},
            )
        await _finished_days_ago(sessionmaker, {message_id: 8})

        assert await _sweep(hub) == 0

        assert message_id in await _rows(sessionmaker, [message_id])
        assert (await _in_redis(hub, redis, message_id))[0] is not None
        assert (await _get(hub, side, message_id)).json()["status"] == "delayed"
        async with sessionmaker() as session:
            age_s = await session.scalar(
                text(
                    "SELECT EXTRACT(EPOCH FROM now() - finished_at) FROM delayed_messages"
                    " WHERE id = :id"
                ),
                {"id": message_id},
            )
        assert float(age_s) < 60
        assert await _cancel(hub, side, message_id) == 204  # Redis still takes the cancel


async def test_a_removed_id_pushed_again_is_a_new_message(
    start_hub: StartHub, settings: Settings, sessionmaker: Maker
) -> None:
    """The hub's own pushes name their ids (a scheduled notification's is its
    notification's): once removed, the id is free, and a push of it queues a new message."""
    async with start_hub(_kept_for(settings)) as hub:
        calls = DelayedCalls(hub.app_state["delayed"], sessionmaker)
        tenant, message_id = f"re-{secrets.token_hex(3)}", str(ULID())
        due_ms = int(time.time() * 1000) + 60_000
        await calls.push(NewMessage(tenant, "again", {"n": 1}, due_ms, id=message_id))
        await calls.cancel(tenant, message_id)
        await _finished_days_ago(sessionmaker, {message_id: 8})
        assert await _sweep(hub) == 1

        assert await calls.push(NewMessage(tenant, "again", {"n": 2}, due_ms, id=message_id))
        assert await calls.status(tenant, message_id) == "delayed"
        async with sessionmaker() as session:
            row = (
                await session.execute(
                    text("SELECT body, status, finished_at FROM delayed_messages WHERE id = :id"),
                    {"id": message_id},
                )
            ).one()
        assert tuple(row) == ({"n": 2}, "delayed", None)


async def test_retention_0_keeps_finished_messages_forever(
    start_hub: StartHub, settings: Settings, sessionmaker: Maker, create_key: CreateKey
) -> None:
    async with start_hub(_kept_for(settings, days=0)) as hub:
        side = await _side(create_key, "rf")
        message_id = await _push(hub, side, "forever", 60_000)
        assert await _cancel(hub, side, message_id) == 204
        await _finished_days_ago(sessionmaker, {message_id: 3650})
        try:
            assert await _sweep(hub) == 0
            assert message_id in await _rows(sessionmaker, [message_id])
            assert (await _get(hub, side, message_id)).json()["status"] == "cancelled"
        finally:  # not left for another test's hub to sweep
            async with sessionmaker.begin() as session:
                await session.execute(
                    text("DELETE FROM delayed_messages WHERE id = :id"), {"id": message_id}
                )


def _drift(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # alembic skips what it cannot compare, with a warning
        diffs = compare_metadata(context, Base.metadata)
    return [d for d in diffs if "delayed_messages" in repr(d)]


async def test_the_migrated_table_matches_the_model(sessionmaker: Maker) -> None:
    async with sessionmaker() as session:
        connection = await session.connection()
        assert await connection.run_sync(_drift) == []
        indexes = await session.scalar(
            text(
                "SELECT indexdef FROM pg_indexes"
                " WHERE indexname = 'ix_delayed_messages_finished_at'"
            )
        )
    assert indexes is not None and "WHERE (finished_at IS NOT NULL)" in indexes


async def test_the_migration_dates_what_finished_before_it(backends: Any) -> None:
    """Rows finished before the column existed get their finishing transition's time, or
    the upgrade's when the log has none; unfinished ones none."""
    import asyncpg

    from support.database import asyncpg_dsn, with_database

    name = f"notifyhub_test_retention_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(asyncpg_dsn(backends.server_url))
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database(backends.server_url, name)
    engine = create_engine(url)
    try:
        await asyncio.to_thread(command.upgrade, alembic_config(url), "0021")
        async with engine.begin() as connection:
            for message_id, status in (
                ("m-consumed", "consumed"),
                ("m-cancelled", "cancelled"),
                ("m-waiting", "delayed"),
            ):
                await connection.execute(
                    text(
                        "INSERT INTO delayed_messages (id, tenant, topic, body, priority, ttl_ms,"
                        " due_at, status) VALUES (:id, 't', 'q', '{}', 0, 1000, now(), :status)"
                    ),
                    {"id": message_id, "status": status},
                )
            await connection.execute(
                text(
                    "INSERT INTO delayed_transitions (message_id, status, at) VALUES"
                    " ('m-consumed', 'delayed', '2020-01-01T00:00Z'),"
                    " ('m-consumed', 'consumed', '2020-01-02T00:00Z')"
                )
            )
        await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
        async with engine.connect() as connection:
            found = await connection.execute(
                text(
                    "SELECT id, finished_at > now() - interval '1 hour',"
                    " to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI')"
                    " FROM delayed_messages ORDER BY id"
                )
            )
            rows = [tuple(r) for r in found]
        assert rows[0][:2] == ("m-cancelled", True)  # no finish logged: the upgrade's time
        assert rows[1] == ("m-consumed", False, "2020-01-02 00:00")
        assert rows[2] == ("m-waiting", None, None)
    finally:
        await engine.dispose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
