"""Group members read for a fan-out: keyset pages of one array each, in member order,
every member once, the groups in the order named; on real PostgreSQL."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.repositories import groups as repo


async def test_members_come_in_pages_in_order_each_once(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    tenant = f"pages-{uuid.uuid4().hex[:8]}"
    big = [f"u{i:03d}" for i in range(25)]
    async with sessionmaker() as session, session.begin():
        for name, members in (("big", big), ("small", ["zed", "amy"]), ("empty", [])):
            assert await repo.create(session, tenant, name)
            gid = await repo.group_id(session, tenant, name)
            assert gid is not None
            await repo.add_members(session, gid, members)
        pages = [
            page
            async for page in repo.iter_member_ids(session, tenant, ["small", "empty", "big"], 10)
        ]
    assert pages == [
        ("small", ["amy", "zed"]),
        ("big", big[:10]),
        ("big", big[10:20]),
        ("big", big[20:]),
    ]
