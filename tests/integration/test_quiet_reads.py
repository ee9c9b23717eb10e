"""What decides streamed users' quiet hours, read in one statement (`quiet.of_users`):
their own schedules and zones and their tenant's default, never another tenant's; on real
PostgreSQL."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import UserProfile
from notifyhub.db.repositories import quiet as repo
from notifyhub.db.repositories.quiet import Default, UserQuiet
from notifyhub.services.quiet_hours import applying_of

NIGHTS = {"mon-sun": ["22:00", "07:00"]}
LUNCH = {"mon-fri": ["12:00", "13:00"]}


async def test_users_schedules_zones_and_the_default_of_their_own_tenant_only(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    ours, theirs = (f"qr-{uuid.uuid4().hex[:8]}" for _ in range(2))
    async with sessionmaker() as session, session.begin():
        await repo.put_default(session, ours, NIGHTS, "Europe/Berlin")
        await repo.put_user(session, ours, "ann", LUNCH)
        await repo.put_user(session, ours, "bo", {})  # none of her own, whatever the default
        session.add(UserProfile(tenant=ours, user_id="ann", time_zone="Asia/Tokyo"))
        session.add(UserProfile(tenant=ours, user_id="cy", time_zone="America/Lima"))
        session.add(UserProfile(tenant=ours, user_id="di", email="di@example.com"))
        # The same names in another tenant, with a default of its own.
        await repo.put_default(session, theirs, LUNCH, "UTC")
        await repo.put_user(session, theirs, "di", NIGHTS)
        session.add(UserProfile(tenant=theirs, user_id="cy", time_zone="Europe/Lisbon"))
    users = ["ann", "bo", "cy", "di", "eve"]
    async with sessionmaker() as session:
        found, default = await repo.of_users(session, ours, users)
        applying = await applying_of(session, ours, users)
        nobody_found, no_default = await repo.of_users(session, f"qr-{uuid.uuid4().hex[:8]}", users)
    assert found == {
        "ann": UserQuiet(LUNCH, "Asia/Tokyo"),
        "bo": UserQuiet({}, None),
        "cy": UserQuiet(None, "America/Lima"),
    }
    assert default == Default(NIGHTS, "Europe/Berlin")
    assert applying == {
        "ann": (LUNCH, "Asia/Tokyo"),
        "bo": ({}, "Europe/Berlin"),
        "cy": (NIGHTS, "America/Lima"),
        "di": (NIGHTS, "Europe/Berlin"),
        "eve": (NIGHTS, "Europe/Berlin"),
    }
    assert (nobody_found, no_default) == ({}, None)


async def test_no_users_read_only_the_default(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    tenant = f"qr-{uuid.uuid4().hex[:8]}"
    async with sessionmaker() as session, session.begin():
        await repo.put_default(session, tenant, NIGHTS, None)
    async with sessionmaker() as session:
        assert await repo.of_users(session, tenant, []) == ({}, Default(NIGHTS, None))
