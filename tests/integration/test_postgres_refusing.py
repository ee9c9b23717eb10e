"""PostgreSQL refusing connections (a restart, a failover, an operator's
`pg_terminate_backend`): what needs it answers 503 problem+json with `Retry-After`, the
rest keeps working.

The fault, on this test's own database: `ALTER DATABASE ... ALLOW_CONNECTIONS false`
(every new connection is refused with SQLSTATE 55000) and every backend of the hub
terminated (57P01 admin shutdown on the connections in its pool).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import asyncpg
import httpx
import pytest

from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.migrate import upgrade_head
from notifyhub.domain.auth import Scope
from notifyhub.services import apikeys
from notifyhub.settings import Settings
from support.database import asyncpg_dsn, with_database
from support.webpush import Browser

Hub = Callable[[Settings], AbstractAsyncContextManager[object]]


@dataclass(frozen=True)
class Database:
    name: str
    url: str
    admin: asyncpg.Connection
    """A connection to the server's maintenance database (the fault is made from there)."""


@pytest.fixture
async def own_database(settings: Settings) -> AsyncIterator[Database]:
    """A migrated database of this test's own: the fault must not reach the run's."""
    assert settings.database_url is not None
    admin = await asyncpg.connect(asyncpg_dsn(with_database(settings.database_url, "postgres")))
    name = f"nh_refusing_{secrets.token_hex(4)}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = with_database(settings.database_url, name)
        await asyncio.to_thread(upgrade_head, url)
        yield Database(name, url, admin)
    finally:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _keys(url: str) -> dict[str, str]:
    """A publish and an admin key the test uses before the fault, and a publish key
    never used before it (so not in the hub's key cache)."""
    engine = create_engine(url)
    try:
        async with create_sessionmaker(engine)() as session, session.begin():
            return {
                name: await apikeys.create_key(session, name=name, scope=scope, tenant=None)
                for name, scope in (
                    ("publish", Scope.PUBLISH),
                    ("admin", Scope.ADMIN),
                    ("unused", Scope.PUBLISH),
                )
            }
    finally:
        await engine.dispose()


@asynccontextmanager
async def refusing(database: Database) -> AsyncIterator[None]:
    """New connections refused and the open ones terminated; restored whatever happens."""
    try:
        await database.admin.execute(f'ALTER DATABASE "{database.name}" ALLOW_CONNECTIONS false')
        terminated = await database.admin.fetchval(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()) AS t",
            database.name,
        )
        assert terminated > 0  # the hub's pooled connections
        yield
    finally:
        await database.admin.execute(f'ALTER DATABASE "{database.name}" ALLOW_CONNECTIONS true')


def _publish(**recipients: list[str]) -> dict[str, object]:
    return {"recipients": recipients, "title": "refused"}


# (what, method, path, body, key): each needs PostgreSQL
NEEDS_POSTGRES = (
    ("publish to a group", "POST", "/v1/notifications", _publish(groups=["g1"]), "publish"),
    ("publish, unknown key", "POST", "/v1/notifications", _publish(users=["ann"]), "unused"),
    ("preferences GET", "GET", "/v1/me/preferences", None, "user"),
    ("preferences PUT", "PUT", "/v1/me/preferences",
     {"categories": {"news": {"inbox": True, "push": False}}}, "user"),
    ("group PUT", "PUT", "/v1/admin/groups/g2", None, "admin"),
    ("group members", "POST", "/v1/admin/groups/g1/members", {"add": ["cy"]}, "admin"),
    ("delayed push", "POST", "/v1/delayed", {"queue": "refused", "delay_ms": 60_000},
     "publish"),
    ("delivery POST", "POST", "/v1/deliveries", {"definition": "d1", "payload": {"n": 1}},
     "publish"),
    # today's surface: users' addresses, tenant defaults, push subscriptions, channels
    ("user addresses PUT", "PUT", "/v1/admin/users/default/ann", {"time_zone": "UTC"},
     "admin"),
    ("preference defaults GET", "GET", "/v1/admin/preference-defaults", None, "admin"),
    ("preference defaults PUT", "PUT", "/v1/admin/preference-defaults",
     {"categories": {"news": {"inbox": True, "push": True, "email": False}}}, "admin"),
    ("push subscription POST", "POST", "/v1/me/push-subscriptions",
     Browser().subscription("https://push.example.test/send/refused"), "user"),
    ("push subscriptions GET", "GET", "/v1/me/push-subscriptions", None, "user"),
    ("push subscription DELETE", "DELETE",
     "/v1/me/push-subscriptions/01JD3Q4M6T9W2Z8K5N7R1C0B3X", None, "user"),
    ("publish with channels", "POST", "/v1/notifications",
     {**_publish(users=["ann"]), "channels": ["inbox", "email"]}, "publish"),
)  # fmt: skip
WITHOUT_POSTGRES = (
    ("publish to users", "POST", "/v1/notifications", _publish(users=["ann"]), "publish"),
    # a topic's subscriptions are copied to Redis (PostgreSQL holds the truth)
    ("publish to a topic", "POST", "/v1/notifications", _publish(topics=["t1"]), "publish"),
    ("inbox list", "GET", "/v1/me/notifications", None, "user"),
    ("inbox counts", "GET", "/v1/me/notifications/counts", None, "user"),
)


async def _prepare(client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    """What the calls name exists, and the publish and admin keys are cached."""
    admin = {"Authorization": f"Bearer {keys['admin']}"}
    definition = {"url": "http://127.0.0.1:9/hook", "retry_intervals": "60s"}
    steps: tuple[tuple[str, str, object], ...] = (
        ("PUT", "/v1/admin/groups/g1", None),
        ("POST", "/v1/admin/groups/g1/members", {"add": ["ann"]}),
        ("PUT", "/v1/admin/topics/t1", {"users": ["ann"]}),
        ("PUT", "/v1/admin/delivery-definitions/d1", definition),
    )
    for method, path, step in steps:
        response = await client.request(method, path, json=step, headers=admin)
        assert response.is_success, response.text
    body = _publish(users=["ann"])
    response = await client.post(
        "/v1/notifications", json=body, headers={"Authorization": f"Bearer {keys['publish']}"}
    )
    assert response.status_code == 202, response.text


async def test_postgres_refusing_connections_is_a_503_and_the_rest_works(
    settings: Settings, own_database: Database, start_hub: Hub
) -> None:
    keys = await _keys(own_database.url)
    changed = {"database_url": own_database.url, "deliveries_allow_private_networks": True}
    async with start_hub(settings.model_copy(update=changed)) as hub:
        client: httpx.AsyncClient = hub.client  # type: ignore[attr-defined]
        keys["user"] = hub.tokens.mint_user_token("ann", "default", 3600)  # type: ignore[attr-defined]
        await _prepare(client, keys)
        async with refusing(own_database):
            for _round in range(2):  # at once (connections terminated), then refused anew
                for what, method, path, body, key in (*NEEDS_POSTGRES, *WITHOUT_POSTGRES):
                    headers = {"Authorization": f"Bearer {keys[key]}"}
                    response = await client.request(method, path, json=body, headers=headers)
                    if (what, method, path, body, key) in WITHOUT_POSTGRES:
                        assert response.is_success, (what, response.text)
                        continue
                    assert response.status_code == 503, (what, response.text)
                    assert response.headers["content-type"] == "application/problem+json"
                    assert response.headers["retry-after"] == "1"
                    assert response.json()["detail"] == "PostgreSQL is unavailable", what
        # Recovered without a restart.
        response = await client.get(
            "/v1/me/preferences", headers={"Authorization": f"Bearer {keys['user']}"}
        )
        assert response.status_code == 200, response.text
