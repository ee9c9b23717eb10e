"""Group members read for a fan-out: keyset pages of one array each, in member order,
every member once, the groups in the order named; on real PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.repositories import groups as repo
from notifyhub.errors import InvalidInput
from notifyhub.services import groups as group_service


@pytest.fixture
def page_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The group id of every member page read (`members_page`) while the test runs."""
    reads: list[int] = []
    real = repo.members_page

    async def counted(session: AsyncSession, gid: int, after: str | None, limit: int) -> list[str]:
        reads.append(gid)
        return await real(session, gid, after, limit)

    monkeypatch.setattr(repo, "members_page", counted)
    return reads


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
    sessionmaker: async_sessionmaker[AsyncSession], page_reads: list[int]
) -> None:
    """No query after a page shorter than the batch (every small group's publish would pay
    a round trip to find nothing); a full last page still needs one to find the end."""
    tenant = f"pages-{uuid.uuid4().hex[:8]}"
    sizes = {"two": 2, "none": 0, "twenty-five": 25, "twenty": 20}
    counts = {}
    async with sessionmaker() as session, session.begin():
        for name, size in sizes.items():
            assert await repo.create(session, tenant, name)
            gid = await repo.group_id(session, tenant, name)
            assert gid is not None
            await repo.add_members(session, gid, [f"u{i:03d}" for i in range(size)])
        for name, size in sizes.items():
            page_reads.clear()
            pages = [p async for _, p in repo.iter_member_ids(session, tenant, [name], 10)]
            assert sum(map(len, pages)) == size
            counts[name] = len(page_reads)
    assert counts == {"two": 1, "none": 1, "twenty-five": 3, "twenty": 3}


async def test_unknown_groups_are_named_before_any_page_is_read(
    sessionmaker: async_sessionmaker[AsyncSession], page_reads: list[int]
) -> None:
    """A publish's groups, looked up once: unknown ones are a 422 naming only them, before
    a member is read; known ones page in the order named."""
    tenant = f"pages-{uuid.uuid4().hex[:8]}"
    async with sessionmaker() as session, session.begin():
        for name, members in (("ops", ["bea", "al"]), ("dev", ["cy"])):
            assert await repo.create(session, tenant, name)
            gid = await repo.group_id(session, tenant, name)
            assert gid is not None
            await repo.add_members(session, gid, members)
        with pytest.raises(InvalidInput, match=r"unknown group: ghost, ghoul$"):
            async for _ in group_service.iter_members(
                session, tenant, ["dev", "ghost", "ops", "ghoul"], 10
            ):
                pass
        assert page_reads == []
        pages = [p async for p in group_service.iter_members(session, tenant, ["dev", "ops"], 10)]
    assert pages == [("dev", ["cy"]), ("ops", ["al", "bea"])]
    assert len(page_reads) == 2
