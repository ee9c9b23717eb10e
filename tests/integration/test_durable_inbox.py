"""Durable inbox mode: notifications committed to PostgreSQL before the 202 (group
commit), state changes appended in batches, every inbox rebuilt after Redis lost it."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import InboxChange, InboxNotification, InboxRecipient
from notifyhub.settings import Settings
from notifyhub.store.keys import Keys


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"inbox_durability": "postgres", "inbox_changes_flush_interval_s": 0.05}
    )


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _publish(hub: Any, key: str, user: str, title: str, **fields: Any) -> str:
    body = {"recipients": {"users": [user]}, "title": title, **fields}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _inbox(hub: Any, token: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    items = (await hub.client.get("/v1/me/notifications", headers=_auth(token))).json()["items"]
    counts = (await hub.client.get("/v1/me/notifications/counts", headers=_auth(token))).json()
    return items, counts


async def _count(sessionmaker: async_sessionmaker[AsyncSession], model: Any, **where: Any) -> int:
    async with sessionmaker() as session:
        query = select(func.count()).select_from(model).filter_by(**where)
        return int(await session.scalar(query) or 0)


async def _lose_redis(redis: Redis, prefix: str) -> None:
    """This test's keys only (the shared Redis is never flushed)."""
    found = [key async for key in redis.scan_iter(match=prefix + "*", count=1000)]
    await redis.unlink(*found)


async def _lose_and_rebuild(redis: Redis, settings: Settings) -> None:
    """Redis loses this test's keys; the epoch watch notices and rebuilds the inboxes."""
    await _lose_redis(redis, settings.redis_prefix)
    epoch = Keys(settings.redis_prefix).epoch
    async with asyncio.timeout(10):
        while not await redis.exists(epoch):
            await asyncio.sleep(0.05)


async def test_inboxes_are_rebuilt_with_their_state(
    hub: Any,
    settings: Settings,
    redis: Redis,
    publish_key: str,
    make_token: Any,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    token = make_token("dora")
    ids = [await _publish(hub, publish_key, "dora", f"n{n}", category="c") for n in range(5)]
    other = await _publish(hub, publish_key, "dora", "other", category="d", ttl=600)
    patched = await hub.client.patch(
        f"/v1/me/notifications/{ids[0]}", json={"read": True}, headers=_auth(token)
    )
    assert patched.status_code == 200
    assert (
        await hub.client.delete(f"/v1/me/notifications/{ids[1]}", headers=_auth(token))
    ).is_success
    recalled = await hub.client.delete(f"/v1/notifications/{ids[2]}", headers=_auth(publish_key))
    assert recalled.status_code == 204
    read_all = await hub.client.post(
        "/v1/me/notifications/read-all", json={"category": "d"}, headers=_auth(token)
    )
    assert read_all.json() == {"updated": 1}
    before_items, before_counts = await _inbox(hub, token)
    assert [i["id"] for i in before_items] == [other, ids[4], ids[3], ids[0]]
    async with asyncio.timeout(10):  # the change log is flushed every 50 ms here
        while await _count(sessionmaker, InboxChange, user_id="dora") < 3:
            await asyncio.sleep(0.05)

    await _lose_and_rebuild(redis, settings)

    after_items, after_counts = await _inbox(hub, token)
    assert before_counts["total"] == 4 and before_counts["unread"] == 2
    assert after_counts == before_counts

    def essentials(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(i["id"], i["status"], i["expires_at"], i["title"]) for i in items]

    assert essentials(after_items) == essentials(before_items)


async def test_a_completed_action_survives_a_rebuild(
    hub: Any,
    settings: Settings,
    redis: Redis,
    publish_key: str,
    make_token: Any,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """The completion is replayed with its first time: the same outcome, still once."""
    token = make_token("dora-act")
    actions = [{"id": "approve", "label": "Approve"}, {"id": "reject", "label": "Reject"}]
    nid = await _publish(hub, publish_key, "dora-act", "expense", actions=actions)
    path = f"/v1/me/notifications/{nid}/actions/reject"
    done = await hub.client.post(path, headers=_auth(token))
    assert done.status_code == 200, done.text
    async with asyncio.timeout(10):
        while await _count(sessionmaker, InboxChange, user_id="dora-act") < 1:
            await asyncio.sleep(0.05)

    await _lose_and_rebuild(redis, settings)
    [item], counts = await _inbox(hub, token)
    assert item["completed"] == done.json()["completed"] and item["status"] == "read"
    assert counts["unread"] == 0
    again = await hub.client.post(
        f"/v1/me/notifications/{nid}/actions/approve", headers=_auth(token)
    )
    assert again.status_code == 409 and again.json()["completed"]["action"] == "reject"


async def test_a_thread_is_rebuilt_whole(
    hub: Any,
    settings: Settings,
    redis: Redis,
    publish_key: str,
    make_token: Any,
) -> None:
    """After Redis lost the inbox, the replay joins the comments again: one item with its
    count and actors (a client told `reset` lists it so)."""
    token = make_token("dora-thread")
    ids = [
        await _publish(
            hub, publish_key, "dora-thread", f"c{n}", thread_key="post:p9", actor={"id": who}
        )
        for n, who in enumerate(["ana", "bo", "ana"])
    ]
    [before], _ = await _inbox(hub, token)
    await _lose_and_rebuild(redis, settings)
    [after], counts = await _inbox(hub, token)
    assert after["id"] == ids[0] and after["thread"] == before["thread"]
    assert after["thread"]["activity_count"] == 3 and after["title"] == "c2"
    assert [a["id"] for a in after["thread"]["actors"]] == ["ana", "bo"]
    assert counts["total"] == 1


async def test_concurrent_publishes_share_commits(
    hub: Any, publish_key: str, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    requests = 40
    ids = await asyncio.gather(
        *(_publish(hub, publish_key, f"gc-{n % 4}", f"g{n}") for n in range(requests))
    )
    durable = hub.app_state["durable"]
    assert 0 < durable.commits < requests  # group commit: several requests per transaction
    async with sessionmaker() as session:
        stored = await session.scalars(
            select(InboxNotification.id).where(InboxNotification.id.in_(ids))
        )
        assert sorted(stored) == sorted(ids)


@pytest.mark.slow  # runs the CLI as a process
async def test_notifyhub_restore_rebuilds_inboxes(
    hub: Any, settings: Settings, redis: Redis, publish_key: str, make_token: Any
) -> None:
    """The CLI runs the same rebuild; here only the user's keys are gone (marker kept)."""
    token = make_token("cli-user")
    sent = [await _publish(hub, publish_key, "cli-user", f"c{n}") for n in range(3)]
    user_keys = Keys(settings.redis_prefix).inbox_list("default", "cli-user")
    await redis.unlink(*user_keys)
    assert (await _inbox(hub, token))[0] == []
    assert settings.jwt_secret is not None
    env = {
        **os.environ,
        "NOTIFYHUB_REDIS_URL": str(settings.redis_url),
        "NOTIFYHUB_DATABASE_URL": str(settings.database_url),
        "NOTIFYHUB_REDIS_PREFIX": settings.redis_prefix,
        "NOTIFYHUB_JWT_SECRET": settings.jwt_secret.get_secret_value(),
        "NOTIFYHUB_INBOX_DURABILITY": "postgres",
    }
    cli = Path(sys.executable).parent / "notifyhub"
    process = await asyncio.create_subprocess_exec(
        cli, "restore", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()
    items, counts = await _inbox(hub, token)
    assert [i["id"] for i in items] == sent[::-1]
    assert counts["total"] == 3


async def test_expired_notifications_are_pruned(
    hub: Any,
    settings: Settings,
    publish_key: str,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    short = await _publish(hub, publish_key, "prune-user", "short", ttl=1)
    kept = await _publish(hub, publish_key, "prune-user", "kept")
    await asyncio.sleep(1.1)
    await hub.app_state["durable"].prune(settings.max_ttl_s)
    assert await _count(sessionmaker, InboxNotification, id=short) == 0
    assert await _count(sessionmaker, InboxRecipient, notification_id=short) == 0
    assert await _count(sessionmaker, InboxNotification, id=kept) == 1
