"""Deleting a group unsubscribes it from its tenant's topics, in PostgreSQL and in the
Redis topic cache, as a topic PATCH removing the group would; other tenants' topics
naming a group of the same name are untouched."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import Topic
from notifyhub.db.unit import UnitOfWork
from notifyhub.services import groups as group_service
from notifyhub.services.topics import TopicMembers

Headers = dict[str, str]


def _auth(token: str) -> Headers:
    return {"Authorization": f"Bearer {token}"}


async def _versions(sessionmaker: async_sessionmaker[AsyncSession], tenant: str) -> dict[str, int]:
    async with sessionmaker() as session:
        rows = await session.execute(
            select(Topic.name, Topic.version).where(Topic.tenant == tenant)
        )
        return {name: version for name, version in rows}


async def _group(hub: Any, admin: Headers, tenant: str, name: str, members: list[str]) -> None:
    url = f"/v1/admin/groups/{name}?tenant={tenant}"
    assert (await hub.client.put(url, headers=admin)).status_code in (200, 201)
    change = await hub.client.post(
        f"/v1/admin/groups/{name}/members?tenant={tenant}", json={"add": members}, headers=admin
    )
    assert change.status_code == 200


async def _put_topic(hub: Any, admin: Headers, tenant: str, name: str, body: Any) -> int:
    url = f"/v1/admin/topics/{name}?tenant={tenant}"
    response = await hub.client.put(url, json=body, headers=admin)
    return int(response.status_code)


async def _reached(hub: Any, admin: Headers, tenant: str, topic: str) -> int:
    send = {"tenant": tenant, "recipients": {"topics": [topic]}, "title": "restock"}
    response = await hub.client.post("/v1/notifications", json=send, headers=admin)
    assert response.status_code == 202, response.text
    return int(response.json()["recipients"])


async def test_deleting_a_group_unsubscribes_it_from_the_tenants_topics(
    hub: Any,
    create_key: Callable[..., Awaitable[str]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    tenant = f"gdel-{uuid.uuid4().hex[:8]}"
    admin = _auth(await create_key("gdel", "admin", tenant))
    cache = hub.app_state["topics"]._cache
    await _group(hub, admin, tenant, "gb", ["m1", "m2"])
    await _group(hub, admin, tenant, "other", ["o1"])
    assert await _put_topic(hub, admin, tenant, "tt", {"users": ["x"], "groups": ["gb"]}) == 201
    assert await _put_topic(hub, admin, tenant, "tt2", {"groups": ["gb", "other"]}) == 201
    assert await _put_topic(hub, admin, tenant, "plain", {"groups": ["other"]}) == 201
    assert await _reached(hub, admin, tenant, "tt") == 3
    before = await _versions(sessionmaker, tenant)

    deleted = await hub.client.delete(f"/v1/admin/groups/gb?tenant={tenant}", headers=admin)
    assert deleted.status_code == 204

    # The topics no longer list it: each took a new version, the untouched one did not.
    url = f"/v1/admin/topics/tt?tenant={tenant}"
    read = (await hub.client.get(url, headers=admin)).json()
    assert (read["users"], read["groups"]) == (["x"], [])
    read2 = (await hub.client.get(f"/v1/admin/topics/tt2?tenant={tenant}", headers=admin)).json()
    assert read2["groups"] == ["other"]
    after = await _versions(sessionmaker, tenant)
    assert after["tt"] > before["tt"]
    assert after["tt2"] > before["tt2"]
    assert after["plain"] == before["plain"]

    # The cache publishes resolve against says the same.
    for name, groups in (("tt", []), ("tt2", ["other"]), ("plain", ["other"])):
        cached = await cache.read(tenant, name)
        assert cached is not None
        assert cached.groups == groups, name
    assert (await cache.read(tenant, "tt")).users == ["x"]  # type: ignore[union-attr]

    # The topic as read back saves unchanged (the console's editor).
    body = {"users": read["users"], "groups": read["groups"]}
    assert await _put_topic(hub, admin, tenant, "tt", body) == 200

    # A group created again under the name is subscribed to nothing.
    await _group(hub, admin, tenant, "gb", ["m1"])
    read = (await hub.client.get(url, headers=admin)).json()
    assert read["groups"] == []
    assert await _reached(hub, admin, tenant, "tt") == 1  # x alone, not m1
    assert await _reached(hub, admin, tenant, "tt2") == 1  # o1 alone
    m1 = _auth(hub.tokens.mint_user_token("m1", tenant))
    inbox = (await hub.client.get("/v1/me/notifications", headers=m1)).json()
    assert len(inbox["items"]) == 1  # the send before the delete only


async def test_deleting_a_group_leaves_other_tenants_same_named_group_subscribed(
    hub: Any,
    create_key: Callable[..., Awaitable[str]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    run = uuid.uuid4().hex[:8]
    a, b = f"gdel-a-{run}", f"gdel-b-{run}"
    admin_a = _auth(await create_key("gdel-a", "admin", a))
    admin_b = _auth(await create_key("gdel-b", "admin", b))
    for tenant, admin in ((a, admin_a), (b, admin_b)):
        await _group(hub, admin, tenant, "g", ["mem"])
        assert await _put_topic(hub, admin, tenant, "t", {"groups": ["g"]}) == 201
    before = await _versions(sessionmaker, b)

    deleted = await hub.client.delete(f"/v1/admin/groups/g?tenant={a}", headers=admin_a)
    assert deleted.status_code == 204

    read_b = (await hub.client.get(f"/v1/admin/topics/t?tenant={b}", headers=admin_b)).json()
    assert read_b["groups"] == ["g"]
    assert await _versions(sessionmaker, b) == before
    cached = await hub.app_state["topics"]._cache.read(b, "t")
    assert cached is not None
    assert cached.groups == ["g"]
    assert await _reached(hub, admin_b, b, "t") == 1
    read_a = (await hub.client.get(f"/v1/admin/topics/t?tenant={a}", headers=admin_a)).json()
    assert read_a["groups"] == []


async def test_a_topic_write_racing_the_delete_cannot_keep_the_group(
    hub: Any,
    create_key: Callable[..., Awaitable[str]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """The topic writer takes a share lock on the groups it names: behind an uncommitted
    delete it waits and then finds the group gone (422); ahead of one, the delete waits
    for it and then unsubscribes the group it added."""
    tenant = f"gdel-race-{uuid.uuid4().hex[:8]}"
    admin = _auth(await create_key("gdel-race", "admin", tenant))
    topics = hub.app_state["topics"]
    url = f"/v1/admin/topics/t?tenant={tenant}"
    await _group(hub, admin, tenant, "g", ["mem"])
    assert await _put_topic(hub, admin, tenant, "t", {"users": ["x"]}) == 201

    # The delete first, still uncommitted, when the topic PUT naming the group comes.
    async with UnitOfWork(sessionmaker) as deleting:
        await group_service.delete_group(deleting, topics, tenant, "g")
        put = asyncio.create_task(hub.client.put(url, json={"groups": ["g"]}, headers=admin))
        await asyncio.sleep(0.5)
        assert not put.done()  # waiting for the delete's lock on the group
    refused = await put
    assert refused.status_code == 422, refused.text
    assert "unknown group: g" in refused.json()["detail"]
    assert (await hub.client.get(url, headers=admin)).json()["groups"] == []

    # The topic change first, still uncommitted, when the delete comes.
    await _group(hub, admin, tenant, "g", ["mem"])
    group_url = f"/v1/admin/groups/g?tenant={tenant}"
    async with UnitOfWork(sessionmaker) as adding:
        await topics.change(adding, tenant, "t", TopicMembers(groups=["g"]), TopicMembers())
        delete = asyncio.create_task(hub.client.delete(group_url, headers=admin))
        await asyncio.sleep(0.5)
        assert not delete.done()  # waiting for the topic change's lock on the group
    assert (await delete).status_code == 204
    assert (await hub.client.get(url, headers=admin)).json()["groups"] == []
    cached = await topics._cache.read(tenant, "t")
    assert cached is not None
    assert cached.groups == []
