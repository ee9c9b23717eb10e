"""Quiet hours (issue 41 item 2): a user's schedule, or the tenant's default, holds their
e-mails and Web Pushes until the window ends (`next_attempt_at`, sent then by the
dispatcher); `critical` is never held; the inbox copy is placed at once. The channel
worker is driven by `run_once` and decides at a controlled instant (the hub's
`QuietHours.clock`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from test_channels import (
    Tenant,
    _address,
    _auth,
    _deliveries,
    _publish,
    _run,
    _subscribe,
    _trace,
    new_tenant,
)

from notifyhub.db.models import Delivery, Escalation
from notifyhub.db.models import Digest as DigestRow
from notifyhub.db.models import QuietHours as QuietHoursRow
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.notification import to_rfc3339
from notifyhub.services.quiet_hours import LOAD_WAIT_S
from notifyhub.settings import Settings
from support.pushservice import PushService
from support.smtp import Smtp, smtp_settings
from support.sse import open_stream

BERLIN = ZoneInfo("Europe/Berlin")
NIGHTS = {"mon-sun": ["22:00", "07:00"]}


@pytest.fixture
def settings(settings: Settings, smtp: Smtp) -> Settings:
    return smtp_settings(
        settings,
        smtp,
        jitter=0.0,
        channel_interval_s=3600,
        dispatcher_interval_s=3600,  # driven by run_once
    )


@pytest.fixture
def hub(hub: Any) -> Any:
    hub.app_state["ingest"].on_channel_send(lambda: None)
    return hub


@pytest.fixture
async def make_tenant(
    create_key: Callable[..., Awaitable[str]],
) -> Callable[[], Awaitable[Tenant]]:
    return lambda: new_tenant(create_key, "qh")


def _night_clock(hub: Any) -> datetime:
    """Fix the hub's quiet-hours clock at 23:00 Berlin of the coming night; the night's
    end (07:00 Berlin) as UTC."""
    tomorrow = datetime.now(BERLIN).date() + timedelta(days=1)
    at = datetime.combine(tomorrow, datetime.min.time().replace(hour=23), BERLIN)
    hub.app_state["quiet"].clock = lambda: at
    return datetime.combine(tomorrow + timedelta(days=1), at.time().replace(hour=7), BERLIN)


async def _dispatch(hub: Any) -> int:
    return int(await hub.app_state["dispatcher"].run_once())


async def _profile(hub: Any, t: Tenant, user: str, **body: Any) -> Any:
    response = await hub.client.put(f"/v1/admin/users/{t.name}/{user}", json=body, headers=t.admin)
    assert response.status_code in (200, 201), response.text
    return response.json()


async def test_a_push_in_quiet_hours_is_held_until_the_end_then_sent(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
) -> None:
    t = await make_tenant()
    shown = await _profile(hub, t, "ann", time_zone="Europe/Berlin", quiet=NIGHTS)
    assert shown["quiet"] == NIGHTS
    [sid] = (await _subscribe(hub, t, "ann", 1, push)).values()
    end = _night_clock(hub)

    nid = await _publish(hub, t, ["ann"], channels=["inbox", "push"])
    me = _auth(hub.tokens.mint_user_token("ann", t.name, 3600))
    listed = (await hub.client.get("/v1/me/notifications", headers=me)).json()
    assert [n["id"] for n in listed["items"]] == [nid]  # the inbox is not held
    await _run(hub)

    [held] = await _deliveries(sessionmaker, nid)
    assert held.next_attempt_at == end.astimezone(UTC)
    until = to_rfc3339(end)
    assert await _trace(hub, t, nid) == {
        "ann": {"push": f"pushed to 1 browser, held for quiet hours until {until}"}
    }
    await _dispatch(hub)  # what else is due in the database goes (other tests'); not this one
    [still] = await _deliveries(sessionmaker, nid)
    assert (still.status, still.attempt, still.next_attempt_at) == (
        held.status,
        held.attempt,
        held.next_attempt_at,
    )
    assert push.of(sid) == []

    # The night passes: the delivery falls due, and the dispatcher's next pass sends it.
    async with UnitOfWork(sessionmaker) as unit:
        await unit.session.execute(
            update(Delivery)
            .where(Delivery.id == held.id)
            .values(next_attempt_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    assert await _dispatch(hub) >= 1
    [pushed] = await push.wait_for(sid, 1)
    assert pushed.status == 201 and pushed.message["id"] == nid


async def test_critical_is_not_held_and_outside_quiet_hours_nothing_is(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "bob", email="bob@shop.test", time_zone="Europe/Berlin", quiet=NIGHTS)
    night_end = _night_clock(hub).astimezone(UTC)
    critical = await _publish(hub, t, ["bob"], channels=["email"], severity="critical")
    await _run(hub)
    assert await _trace(hub, t, critical) == {"bob": {"email": "e-mailed"}}

    noon = datetime.combine(datetime.now(BERLIN).date(), datetime.min.time(), BERLIN)
    hub.app_state["quiet"].clock = lambda: noon + timedelta(hours=12)
    daytime = await _publish(hub, t, ["bob"], channels=["email"])
    await _run(hub)
    assert await _trace(hub, t, daytime) == {"bob": {"email": "e-mailed"}}
    for nid in (critical, daytime):
        # Not held: due at once. The hub's sender, kicked when the expansion commits, may
        # already have claimed it (`next_attempt_at` a lease ahead), never to the night's end.
        [delivery] = await _deliveries(sessionmaker, nid)
        assert delivery.next_attempt_at < night_end


async def test_the_tenant_default_applies_to_users_without_their_own(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    body = {"schedule": NIGHTS, "time_zone": "Europe/Berlin"}
    put = await hub.client.put(
        "/v1/admin/quiet-defaults", json=body, params={"tenant": t.name}, headers=t.admin
    )
    assert put.status_code == 201, put.text
    await _address(hub, t, "cy", "cy@shop.test")  # no zone: the default's
    await _profile(hub, t, "dee", email="dee@shop.test", quiet={})  # opted out
    end = _night_clock(hub)
    nid = await _publish(hub, t, ["cy", "dee"], channels=["email"])
    await _run(hub)
    due = {d.payload["user"]: d.next_attempt_at for d in await _deliveries(sessionmaker, nid)}
    assert due["cy"] == end.astimezone(UTC)
    assert due["dee"] < end.astimezone(UTC)  # not held (a claim may have moved it a lease on)

    shown = await hub.client.get(f"/v1/admin/users/{t.name}/cy", headers=t.admin)
    assert shown.status_code == 200, shown.text
    assert shown.json()["quiet"] == {
        "schedule": NIGHTS,
        "source": "tenant",
        "time_zone": "Europe/Berlin",
        "quiet_now": True,
        "until": end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),  # as every time
    }


async def test_quiet_defaults_are_per_tenant(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]]
) -> None:
    a, b = await make_tenant(), await make_tenant()
    body = {"schedule": {"sat-sun": ["00:00", "24:00"]}, "time_zone": None}
    url = "/v1/admin/quiet-defaults"
    assert (
        await hub.client.put(url, json=body, params={"tenant": a.name}, headers=a.admin)
    ).status_code == 201
    # b's key can neither read nor change a's default.
    assert (
        await hub.client.get(url, params={"tenant": a.name}, headers=b.admin)
    ).status_code == 403
    assert (
        await hub.client.put(url, json=body, params={"tenant": a.name}, headers=b.admin)
    ).status_code == 403
    own = await hub.client.get(url, params={"tenant": b.name}, headers=b.admin)
    assert own.json() == {"tenant": b.name, "schedule": {}, "time_zone": None}
    again = await hub.client.put(url, json=body, params={"tenant": a.name}, headers=a.admin)
    assert again.status_code == 200
    assert (await hub.client.get(url, params={"tenant": a.name}, headers=a.admin)).json() == {
        "tenant": a.name,
        **body,
    }


@pytest.mark.parametrize(
    ("quiet", "message"),
    [
        ({"weekdays": ["22:00", "07:00"]}, "is not a day"),
        ({"mon": ["22:00", "25:00"]}, "not a time as HH:MM"),
        ({"mon": ["22:00"]}, "at least 2"),
        ({"mon-fri": ["22:00", "07:00"], "wed": ["01:00", "02:00"]}, "'wed' is named twice"),
    ],
)
async def test_a_bad_schedule_is_a_422_naming_it(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]], quiet: Any, message: str
) -> None:
    t = await make_tenant()
    response = await hub.client.put(
        f"/v1/admin/users/{t.name}/ann", json={"quiet": quiet}, headers=t.admin
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert message in response.text
    defaults = await hub.client.put(
        "/v1/admin/quiet-defaults",
        json={"schedule": quiet},
        params={"tenant": t.name},
        headers=t.admin,
    )
    assert defaults.status_code == 422 and message in defaults.text


@pytest.mark.parametrize(
    "zone", ["localtime", "posixrules", "right/UTC", "America", "zone.tab", "Mars/Base", ""]
)
async def test_a_zone_outside_the_tz_database_is_a_422_for_a_user_and_a_default(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]], zone: str
) -> None:
    """One validator for both: the default's once let `localtime` (the hub host's zone),
    `posixrules` and the `right/` copies by."""
    t = await make_tenant()
    user = await hub.client.put(
        f"/v1/admin/users/{t.name}/ann", json={"time_zone": zone}, headers=t.admin
    )
    defaults = await hub.client.put(
        "/v1/admin/quiet-defaults",
        json={"schedule": {}, "time_zone": zone},
        params={"tenant": t.name},
        headers=t.admin,
    )
    for answer in (user, defaults):
        assert answer.status_code == 422, answer.text
        assert "time_zone" in answer.text


async def _emails_of(
    sessionmaker: async_sessionmaker[AsyncSession], t: Tenant, n: int
) -> list[Delivery]:
    """The tenant's `n` e-mail deliveries, once its hub's workers (running on their own
    as well as driven here) have committed them."""
    async with asyncio.timeout(5):
        while True:
            async with sessionmaker() as session:
                found = list(
                    await session.scalars(select(Delivery).where(Delivery.tenant == t.name))
                )
            if len(found) >= n:
                return found
            await asyncio.sleep(0.05)


async def test_the_hubs_digests_and_escalation_steps_are_held_as_its_channel_sends_are(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """The hub's digest and escalation workers judge quiet hours with the channel
    worker's clock and schedules (one `ChannelRows`)."""
    t = await make_tenant()
    await _profile(hub, t, "ann", email="ann@shop.test", time_zone="Europe/Berlin", quiet=NIGHTS)
    end = _night_clock(hub).astimezone(UTC)
    step = {"after_s": 3600, "unless": "read", "channel": "email"}
    stepped = await _publish(hub, t, ["ann"], escalate=[step])
    await _publish(hub, t, ["ann"], channels=["email"], digest={"key": "k", "window_s": 3600})
    await _run(hub)  # the digest opens
    past = datetime.now(UTC) - timedelta(seconds=1)
    async with UnitOfWork(sessionmaker) as unit:  # both fall due now
        session = unit.session
        await session.execute(
            update(Escalation).where(Escalation.tenant == t.name).values(due_at=past)
        )
        await session.execute(
            update(DigestRow).where(DigestRow.tenant == t.name).values(due_at=past)
        )
    loops = hub.app_state["runner"]
    await loops.loop("escalations").step()
    await loops.loop("digests").step()

    emails = await _emails_of(sessionmaker, t, 2)
    kinds = {"digest" in d.payload: d.payload["notification"]["id"] for d in emails}
    assert kinds[False] == stepped
    assert [d.next_attempt_at for d in emails] == [end, end]
    assert (await _trace(hub, t, stepped))["ann"]["escalate 1"].endswith(
        f"held for quiet hours until {to_rfc3339(end)}"
    )


async def _loaded(hub: Any, t: Tenant, user: str) -> Any:
    """The user's stream entry once its background read has landed."""
    entry = hub.app_state["quiet_streams"].flag(t.name, user)
    async with asyncio.timeout(5):
        while entry.loading:
            await asyncio.sleep(0.01)
    return entry


async def test_the_stream_is_never_held_and_says_quiet_in_quiet_hours(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]]
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "ann", time_zone="Europe/Berlin", quiet=NIGHTS)
    _night_clock(hub)
    token = hub.tokens.mint_user_token("ann", t.name, 3600)
    async with open_stream(hub.client, token) as events:
        await events.until("counts")
        entry = await _loaded(hub, t, "ann")
        inline = await _publish(hub, t, ["ann"])  # an inlinable one: the doorbell's frame
        logged = await _publish(hub, t, ["ann"], category="dock")  # read from the log
        for nid in (inline, logged):
            event, _ = await events.until("notification")
            assert event.data["id"] == nid and event.data["quiet"] is True
        # Critical is never held, on a stream neither: its toast shows in quiet hours.
        for fields in ({}, {"category": "dock"}):
            alarm = await _publish(hub, t, ["ann"], severity="critical", **fields)
            event, _ = await events.until("notification")
            assert event.data["id"] == alarm and "quiet" not in event.data

        noon = datetime.combine(datetime.now(BERLIN).date(), datetime.min.time(), BERLIN)
        hub.app_state["quiet"].clock = lambda: noon + timedelta(hours=12)
        daytime = await _publish(hub, t, ["ann"])
        event, _ = await events.until("notification")
        assert event.data["id"] == daytime and "quiet" not in event.data

        # A schedule changed reaches the open stream at its next read.
        _night_clock(hub)
        await _profile(hub, t, "ann", quiet={})
        entry.loaded_at = 0.0  # its refresh is due
        assert entry.quiet() is True  # (the old copy, while the read runs)
        await _loaded(hub, t, "ann")
        after = await _publish(hub, t, ["ann"])
        event, _ = await events.until("notification")
        assert event.data["id"] == after and "quiet" not in event.data


async def test_a_storm_of_stream_opens_reads_quiet_hours_in_a_few_batches(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Streams reopening a few at a time (300 users, 10 per loop turn, as a reconnect
    storm brings them) are read together: one read per LOAD_WAIT_S they took to open
    (plus the last), not one per few streams."""
    t = await make_tenant()
    await _profile(hub, t, "u7", time_zone="Europe/Berlin", quiet=NIGHTS)
    quiet_streams = hub.app_state["quiet_streams"]
    batches: list[int] = []
    load = quiet_streams._load

    async def counted(batch: list[Any]) -> None:
        batches.append(len(batch))
        await load(batch)

    monkeypatch.setattr(quiet_streams, "_load", counted)
    _night_clock(hub)
    entries = []
    started = time.monotonic()
    for turn in range(30):
        entries += [quiet_streams.flag(t.name, f"u{turn * 10 + i}") for i in range(10)]
        await asyncio.sleep(0.001)
    opening_s = time.monotonic() - started  # about 40 ms, more on a busy machine
    async with asyncio.timeout(5):
        while any(entry.loading for entry in entries):
            await asyncio.sleep(0.01)
    assert sum(batches) == 300 and len(batches) <= 2 + opening_s / LOAD_WAIT_S, batches
    assert [entry.quiet() for entry in entries[6:9]] == [False, True, False]


async def test_a_read_waiting_at_shutdown_never_runs(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`close` (the hub's shutdown, before its engine goes) cancels the read gathering
    streamed users, and no read starts afterwards: none opens a connection to a
    database being closed."""
    t = await make_tenant()
    quiet_streams = hub.app_state["quiet_streams"]
    loads: list[int] = []

    async def counted(batch: list[Any]) -> None:
        loads.append(len(batch))

    monkeypatch.setattr(quiet_streams, "_load", counted)
    quiet_streams.flag(t.name, "ann")  # its read waits LOAD_WAIT_S for others
    await quiet_streams.close()
    late = quiet_streams.flag(t.name, "bob")
    await asyncio.sleep(2 * LOAD_WAIT_S)
    assert loads == [] and not late.loading


async def test_a_stored_schedule_that_does_not_read_holds_back_nobody(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """A user's stored schedule that no longer reads (written by hand or by an older hub)
    is no quiet hours, logged: it used to fail the channel worker's chunk at every try,
    holding back the e-mails of everyone sent with that user, and the admin lookup of the
    user answered 500."""
    t = await make_tenant()
    for user in ("ann", "bob"):
        await _profile(
            hub, t, user, email=f"{user}@shop.test", time_zone="Europe/Berlin", quiet=NIGHTS
        )
    async with UnitOfWork(sessionmaker) as unit:
        await unit.session.execute(
            update(QuietHoursRow)
            .where(QuietHoursRow.tenant == t.name, QuietHoursRow.user_id == "ann")
            .values(schedule={"mon": ["25:00", "07:00"]})
        )
    end = _night_clock(hub)
    nid = await _publish(hub, t, ["ann", "bob"], channels=["email"])
    await _run(hub)
    until = to_rfc3339(end)
    assert await _trace(hub, t, nid) == {
        "ann": {"email": "e-mailed"},
        "bob": {"email": f"e-mailed, held for quiet hours until {until}"},
    }
    shown = await hub.client.get(f"/v1/admin/users/{t.name}/ann", headers=t.admin)
    assert shown.status_code == 200, shown.text
    assert shown.json()["quiet"]["quiet_now"] is False
