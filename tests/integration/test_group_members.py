"""Group members read for a fan-out: keyset pages of one array each, in member order,
every member once, the groups in the order named; on real PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
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


async def test_a_short_page_is_the_last_one_read(
    sessionmaker: async_sessionmaker[AsyncSession], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No query after a page shorter than the batch (every small group's publish would pay
    a round trip to find nothing); a full last page still needs one to find the end."""
    tenant = f"pages-{uuid.uuid4().hex[:8]}"
    reads: list[tuple[int, str]] = []
    real = repo.members_page

    async def counted(session: AsyncSession, gid: int, after: str | None, limit: int) -> list[str]:
        reads.append((gid, after or ""))
        return await real(session, gid, after, limit)

    monkeypatch.setattr(repo, "members_page", counted)
    sizes = {"two": 2, "none": 0, "twenty-five": 25, "twenty": 20}
    counts = {}
    async with sessionmaker() as session, session.begin():
        for name, size in sizes.items():
            assert await repo.create(session, tenant, name)
            gid = await repo.group_id(session, tenant, name)
            assert gid is not None
            await repo.add_members(session, gid, [f"u{i:03d}" for i in range(size)])
        for name, size in sizes.items():
            reads.clear()
            pages = [p async for _, p in repo.iter_member_ids(session, tenant, [name], 10)]
            assert sum(map(len, pages)) == size
            counts[name] = len(reads)
    assert counts == {"two": 1, "none": 1, "twenty-five": 3, "twenty": 3}
