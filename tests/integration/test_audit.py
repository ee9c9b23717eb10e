"""The audit log: every mutating admin request (refusals too) with who, where, what and
how it ended; written with the action's own transaction; read by tenant, a page at a time."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.base import Base

Maker = async_sessionmaker[AsyncSession]
CreateKey = Callable[..., Awaitable[str]]


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _entries(hub: Any, key: str, **params: Any) -> list[dict[str, Any]]:
    answer = await hub.client.get("/v1/admin/audit", params=params, headers=_auth(key))
    assert answer.status_code == 200, answer.text
    return list(answer.json()["entries"])


async def test_admin_actions_are_recorded_with_who_what_and_how(
    hub: Any, create_key: CreateKey
) -> None:
    tenant = f"au-{secrets.token_hex(3)}"
    key = await create_key("audit-admin", "admin", tenant)
    admin = _auth(key)
    assert (
        await hub.client.put(f"/v1/admin/groups/ops?tenant={tenant}", headers=admin)
    ).status_code == 201
    assert (
        await hub.client.get(f"/v1/admin/groups/ops?tenant={tenant}", headers=admin)
    ).status_code == 200
    topic = await hub.client.put(
        f"/v1/admin/topics/news?tenant={tenant}", json={"users": ["u1"]}, headers=admin
    )
    assert topic.status_code == 201
    refused = await hub.client.delete(f"/v1/admin/groups/nope?tenant={tenant}", headers=admin)
    assert refused.status_code == 404
    name = f"made-{secrets.token_hex(4)}"
    body = {"name": name, "scope": "publish", "tenant": tenant}
    assert (
        await hub.client.post("/v1/admin/api-keys", json=body, headers=admin)
    ).status_code == 201
    invalid = await hub.client.post(
        f"/v1/admin/groups/ops/members?tenant={tenant}", json={"add": "x"}, headers=admin
    )
    assert invalid.status_code == 422

    entries = await _entries(hub, key)
    seen = [(e["method"], e["route"], e["target"], e["status"]) for e in entries]
    assert seen == [  # newest first; reads are not recorded
        ("POST", "/v1/admin/groups/{group}/members", "ops", 422),
        ("POST", "/v1/admin/api-keys", name, 201),
        ("DELETE", "/v1/admin/groups/{group}", "nope", 404),
        ("PUT", "/v1/admin/topics/{topic}", "news", 201),
        ("PUT", "/v1/admin/groups/{group}", "ops", 201),
    ]
    assert {e["tenant"] for e in entries} == {tenant}
    assert {e["key_tenant"] for e in entries} == {tenant}
    assert all(e["key_name"].startswith("audit-admin-") for e in entries)


async def test_a_bound_key_reads_its_tenant_only(
    hub: Any, create_key: CreateKey, admin_key: str
) -> None:
    a, b = f"aa-{secrets.token_hex(3)}", f"ab-{secrets.token_hex(3)}"
    key_a, key_b = await create_key("aa", "admin", a), await create_key("ab", "admin", b)
    await hub.client.put(f"/v1/admin/groups/g?tenant={b}", headers=_auth(key_b))
    assert await _entries(hub, key_a) == []
    refused = await hub.client.get(f"/v1/admin/audit?tenant={b}", headers=_auth(key_a))
    assert refused.status_code == 403
    assert [e["tenant"] for e in await _entries(hub, key_b)] == [b]
    assert [e["tenant"] for e in await _entries(hub, admin_key, tenant=b)] == [b]
    attack = await hub.client.put(f"/v1/admin/groups/g?tenant={b}", headers=_auth(key_a))
    assert attack.status_code == 403
    [refused] = await _entries(hub, key_a)  # filed under the attacker's own tenant
    assert (refused["tenant"], refused["status"], refused["target"]) == (a, 403, "g")
    assert [e["status"] for e in await _entries(hub, key_b)] == [201]


async def test_pages_and_filters(hub: Any, create_key: CreateKey) -> None:
    tenant = f"ap-{secrets.token_hex(3)}"
    key = await create_key("ap", "admin", tenant)
    for i in range(5):
        await hub.client.put(f"/v1/admin/groups/g{i}?tenant={tenant}", headers=_auth(key))
    await hub.client.delete(f"/v1/admin/groups/g0?tenant={tenant}", headers=_auth(key))
    targets: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        answer = await hub.client.get("/v1/admin/audit", params=params, headers=_auth(key))
        page = answer.json()
        targets += [e["target"] for e in page["entries"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert targets == ["g0", "g4", "g3", "g2", "g1", "g0"]
    deletes = await _entries(hub, key, route="/v1/admin/groups/{group}")
    assert len(deletes) == 6
    assert await _entries(hub, key, since="9999-01-01T00:00:00Z") == []
    assert len(await _entries(hub, key, until="9999-01-01T00:00:00Z")) == 6
    for cursor in ("x1", "1" * 19):
        bad = await hub.client.get(f"/v1/admin/audit?cursor={cursor}", headers=_auth(key))
        assert bad.status_code == 422


async def test_a_refusal_naming_control_characters_is_recorded_escaped(
    hub: Any, create_key: CreateKey, caplog: pytest.LogCaptureFixture
) -> None:
    """A refusal's target is its path parameters as they came: NUL, which PostgreSQL's
    text refuses, once lost the entry (an error logged instead)."""
    tenant = f"an-{secrets.token_hex(3)}"
    key = await create_key("au-nul", "admin", tenant)
    for path in ("g%00", "%01" * 200 + "x"):
        answer = await hub.client.put(
            f"/v1/admin/groups/{path}?tenant={tenant}", headers=_auth(key)
        )
        assert answer.status_code == 422
    seen = [(e["route"], e["target"], e["status"]) for e in await _entries(hub, key)]
    assert seen == [
        ("/v1/admin/groups/{group}", "\\x01" * 125, 422),  # escaped, then cut at 500
        ("/v1/admin/groups/{group}", "g\\x00", 422),
    ]
    assert "not written" not in caplog.text


async def test_the_entry_commits_with_the_action_or_neither_does(
    hub: Any, create_key: CreateKey, sessionmaker: Maker
) -> None:
    """An audit entry that cannot be written fails its action: nothing half-done."""
    tenant = f"at-{secrets.token_hex(3)}"
    key = await create_key("blocked", "admin", tenant)
    check = f"audit_block_{secrets.token_hex(3)}"
    async with sessionmaker() as session, session.begin():
        await session.execute(
            text(f"ALTER TABLE audit_log ADD CONSTRAINT {check} CHECK (tenant <> '{tenant}')")
        )
    try:
        answer = await hub.client.put(f"/v1/admin/groups/g?tenant={tenant}", headers=_auth(key))
        assert answer.status_code >= 500
    finally:
        async with sessionmaker() as session, session.begin():
            await session.execute(text(f"ALTER TABLE audit_log DROP CONSTRAINT {check}"))
    missing = await hub.client.get(f"/v1/admin/groups/g?tenant={tenant}", headers=_auth(key))
    assert missing.status_code == 404  # the group was rolled back with its entry


def _drift(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return [d for d in compare_metadata(context, Base.metadata) if "audit_log" in repr(d)]


async def test_the_migrated_table_matches_the_model(sessionmaker: Maker) -> None:
    async with sessionmaker() as session:
        connection = await session.connection()
        assert await connection.run_sync(_drift) == []
