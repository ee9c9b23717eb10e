"""Digests (issue 41 item 3): notifications under one digest key reach each user's e-mail
and push as ONE message per window and their inbox as one thread. The channel worker and
the digest worker are driven by `run_once` with a controlled clock (no sleeping for the
window); e-mails reach a local SMTP server, pushes a local push service."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import literal, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import Delivery, DigestItem
from notifyhub.db.models import Digest as DigestRow
from notifyhub.db.unit import UnitOfWork, units
from notifyhub.domain.notification import to_rfc3339
from notifyhub.services.channel_rows import ChannelRows
from notifyhub.services.channels import ChannelExpander
from notifyhub.services.digests import DigestBook, DigestSender, Flushed
from notifyhub.services.quiet_hours import QuietHours
from notifyhub.settings import Settings
from notifyhub.workers.channels import ChannelWorker
from notifyhub.workers.digests import DigestWorker
from support.deliveries import wait_status
from support.pushservice import PushService
from support.smtp import Smtp, smtp_settings
from support.webpush import Browser

Headers = dict[str, str]


@pytest.fixture
def settings(settings: Settings, smtp: Smtp) -> Settings:
    return smtp_settings(
        settings,
        smtp,
        jitter=0.0,
        channel_interval_s=3600,  # the test's own workers (controlled clock) do the work
        digest_interval_s=3600,
    )


@pytest.fixture
def hub(hub: Any) -> Any:
    hub.app_state["ingest"].on_channel_send(lambda: None)
    return hub


class Clock:
    """A controlled clock: `now` moves only when the test says."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Workers:
    """The channel worker and the digest worker of the test, on one controlled clock."""

    clock: Clock
    channels: ChannelWorker
    digests: DigestWorker

    async def run(self) -> int:
        """A pass of each: the sends expanded, then what is due sent; digests closed."""
        await self.channels.run_once()
        return await self.digests.run_once()


def _workers(sessionmaker: async_sessionmaker[AsyncSession], clock: Clock) -> Workers:
    rows = ChannelRows(quiet=QuietHours(clock))
    return Workers(
        clock,
        ChannelWorker(units(sessionmaker), ChannelExpander(500, rows, DigestBook(clock))),
        DigestWorker(units(sessionmaker), DigestSender(rows, clock)),
    )


@pytest.fixture
def workers(sessionmaker: async_sessionmaker[AsyncSession]) -> Workers:
    return _workers(sessionmaker, Clock())


def _auth(key: str) -> Headers:
    return {"Authorization": f"Bearer {key}"}


@dataclass
class Tenant:
    name: str
    publish: Headers
    admin: Headers


@pytest.fixture
async def make_tenant(create_key: Callable[..., Awaitable[str]]) -> Callable[[], Awaitable[Tenant]]:
    async def make() -> Tenant:
        name = f"dg-{secrets.token_hex(4)}"
        publish = _auth(await create_key(f"{name}-p", "publish", name))
        admin = _auth(await create_key(f"{name}-a", "admin", name))
        return Tenant(name, publish, admin)

    return make


async def _profile(hub: Any, t: Tenant, user: str, **fields: Any) -> None:
    url = f"/v1/admin/users/{t.name}/{user}"
    response = await hub.client.put(url, json=fields, headers=t.admin)
    assert response.status_code in (200, 201), response.text


async def _publish(hub: Any, t: Tenant, users: list[str], n: int = 0, **extra: Any) -> str:
    body = {
        "tenant": t.name,
        "recipients": {"users": users},
        "title": f"Comment {n}",
        "actor": {"id": f"actor{n % 3}"},
        "channels": ["inbox", "email"],
        **extra,
    }
    response = await hub.client.post("/v1/notifications", json=body, headers=t.publish)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _digest_emails(
    sessionmaker: async_sessionmaker[AsyncSession], t: Tenant, user: str
) -> list[Delivery]:
    async with sessionmaker() as session:
        rows = await session.scalars(
            select(Delivery)
            .where(
                Delivery.tenant == t.name,
                Delivery.definition == "email",
                Delivery.payload["user"].astext == user,
            )
            .order_by(Delivery.id)
        )
        return list(rows)


async def _digests(
    sessionmaker: async_sessionmaker[AsyncSession], t: Tenant, user: str
) -> list[DigestRow]:
    async with sessionmaker() as session:
        rows = await session.scalars(
            select(DigestRow)
            .where(DigestRow.tenant == t.name, DigestRow.user_id == user)
            .order_by(DigestRow.opened_at, DigestRow.id)
        )
        return list(rows)


async def _inbox(hub: Any, t: Tenant, user: str) -> list[dict[str, Any]]:
    token = hub.tokens.mint_user_token(user, t.name, 3600)
    response = await hub.client.get("/v1/me/notifications", headers=_auth(token))
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


DIGEST = {"key": "comments:p1", "window_s": 600}


async def test_twenty_notifications_make_one_email_with_twenty_items_and_one_thread(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
    smtp: Smtp,
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "ann", email="ann@shop.test")
    for n in range(20):
        await _publish(hub, t, ["ann"], n, digest=DIGEST)
        assert await workers.run() == 0
        workers.clock.advance(5)
    assert await _digest_emails(sessionmaker, t, "ann") == []

    workers.clock.advance(600 - 100)  # the fixed window: 600 s after the first
    assert await workers.run() == 1
    [email] = await _digest_emails(sessionmaker, t, "ann")
    digest = email.payload["digest"]
    assert digest["count"] == 20 and len(digest["items"]) == 20
    assert [i["title"] for i in digest["items"]] == [f"Comment {n}" for n in reversed(range(20))]
    assert sorted(a["id"] for a in digest["actors"]) == ["actor0", "actor1", "actor2"]
    assert email.payload["notification"]["title"] == "20 new: Comment 19"
    opened = email.payload["notification"]["created_at"]  # as every time the hub writes
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", opened), opened
    assert await workers.run() == 0  # closed: nothing sent twice

    await wait_status(hub.client, t.publish["Authorization"][7:], email.id, "sent", tenant=t.name)
    [(rcpt, message)] = smtp.of(email.id)
    assert rcpt == ["ann@shop.test"]
    assert message["Subject"] == "20 new: Comment 19"
    text = message.get_payload(decode=True).decode()
    assert "- Comment 0" in text and "- Comment 19" in text

    [item] = await _inbox(hub, t, "ann")
    assert item["thread_key"] == "digest:comments:p1"
    assert item["thread"]["activity_count"] == 20


async def test_max_items_closes_a_digest_early_and_the_next_opens_a_new_one(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "bob", email="bob@shop.test")
    for n in range(12):
        await _publish(hub, t, ["bob"], n, digest={**DIGEST, "max_items": 5})
    assert await workers.run() == 2  # two full ones at once, no window waited
    counts = [
        len(e.payload["digest"]["items"]) for e in await _digest_emails(sessionmaker, t, "bob")
    ]
    assert counts == [5, 5]
    states = [(d.state, d.item_count) for d in await _digests(sessionmaker, t, "bob")]
    assert states == [("sent", 5), ("sent", 5), ("open", 2)]


async def test_a_sliding_window_waits_for_a_quiet_spell_a_fixed_one_does_not(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "fix", email="fix@shop.test")
    await _profile(hub, t, "sli", email="sli@shop.test")
    fixed = {"key": "k", "window_s": 60, "mode": "fixed"}
    sliding = {"key": "k", "window_s": 60, "mode": "sliding"}
    for n in range(3):  # at 0, 40 and 80 s
        await _publish(hub, t, ["fix"], n, digest=fixed)
        await _publish(hub, t, ["sli"], n, digest=sliding)
        await workers.run()
        workers.clock.advance(40)
    # now 120 s: the fixed window closed at 60 s (2 items), the next one opened at 80 s
    fix = [len(e.payload["digest"]["items"]) for e in await _digest_emails(sessionmaker, t, "fix")]
    assert fix == [2]
    assert await _digest_emails(sessionmaker, t, "sli") == []  # closes 60 s after 80 s
    workers.clock.advance(20)  # 140 s
    await workers.run()
    sli = [len(e.payload["digest"]["items"]) for e in await _digest_emails(sessionmaker, t, "sli")]
    assert sli == [3]
    fix = [len(e.payload["digest"]["items"]) for e in await _digest_emails(sessionmaker, t, "fix")]
    assert fix == [2, 1]


async def test_a_sliding_window_is_capped_at_four_windows(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "cap", email="cap@shop.test")
    for n in range(9):  # every 30 s, a window of 60 s: it would slide for ever
        await _publish(hub, t, ["cap"], n, digest={"key": "k", "window_s": 60, "mode": "sliding"})
        await workers.run()
        workers.clock.advance(30)
    # opened at 0, so closed at 240 s (four windows) with the items of 0..210 s; the one
    # at 240 s opened the next
    [email] = await _digest_emails(sessionmaker, t, "cap")
    assert email.payload["digest"]["count"] == 8
    first, second = await _digests(sessionmaker, t, "cap")
    assert first.due_at - first.opened_at == timedelta(seconds=240)
    assert (second.state, second.item_count) == ("open", 1)


async def test_first_now_sends_the_first_at_once_and_digests_the_rest(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "cy", email="cy@shop.test")
    first = await _publish(hub, t, ["cy"], 0, digest={**DIGEST, "first": "now"})
    await workers.run()
    [single] = await _digest_emails(sessionmaker, t, "cy")
    assert single.payload["notification"]["id"] == first and "digest" not in single.payload
    for n in range(1, 4):
        await _publish(hub, t, ["cy"], n, digest={**DIGEST, "first": "now"})
    await workers.run()
    assert len(await _digest_emails(sessionmaker, t, "cy")) == 1
    workers.clock.advance(600)
    assert await workers.run() == 1
    emails = await _digest_emails(sessionmaker, t, "cy")
    [digest] = [e for e in emails if "digest" in e.payload]
    assert digest.payload["digest"]["count"] == 3

    # alone in its window, the first is all there is: the window closes with nothing
    await _publish(hub, t, ["cy"], 9, digest={**DIGEST, "first": "now"})
    await workers.run()
    workers.clock.advance(600)
    assert await workers.run() == 1
    assert len(await _digest_emails(sessionmaker, t, "cy")) == 3
    assert (await _digests(sessionmaker, t, "cy"))[-1].state == "empty"


async def test_at_closes_the_window_at_the_next_local_time_in_the_users_zone(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "sp", email="sp@shop.test", time_zone="America/Sao_Paulo")
    await _profile(hub, t, "be", email="be@shop.test", time_zone="Europe/Berlin")
    workers.clock.now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # 06:00 in Sao Paulo, 10:00 Berlin
    for n in range(3):
        await _publish(hub, t, ["sp", "be"], n, digest={"key": "daily", "at": "09:00"})
    await workers.run()
    due = {u: [d.due_at for d in await _digests(sessionmaker, t, u)] for u in ("sp", "be")}
    assert due == {
        "sp": [datetime(2026, 3, 2, 12, 0, tzinfo=UTC)],  # 09:00 today, UTC-3
        "be": [datetime(2026, 3, 3, 8, 0, tzinfo=UTC)],  # 09:00 tomorrow, UTC+1
    }
    workers.clock.now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert await workers.run() == 1
    assert len(await _digest_emails(sessionmaker, t, "sp")) == 1
    assert await _digest_emails(sessionmaker, t, "be") == []
    workers.clock.now = datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    assert await workers.run() == 1
    [email] = await _digest_emails(sessionmaker, t, "be")
    assert email.payload["digest"]["count"] == 3


async def test_critical_skips_the_digest(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "dan", email="dan@shop.test")
    for n in range(3):
        await _publish(hub, t, ["dan"], n, digest=DIGEST, severity="critical")
    await workers.run()
    emails = await _digest_emails(sessionmaker, t, "dan")
    assert len(emails) == 3 and all("digest" not in e.payload for e in emails)
    assert await _digests(sessionmaker, t, "dan") == []


async def _prefs(hub: Any, t: Tenant, user: str, categories: dict[str, Any]) -> None:
    token = hub.tokens.mint_user_token(user, t.name, 3600)
    response = await hub.client.put(
        "/v1/me/preferences", json={"categories": categories}, headers=_auth(token)
    )
    assert response.status_code == 200, response.text


async def _subscribe(hub: Any, t: Tenant, user: str, push: PushService) -> None:
    me = _auth(hub.tokens.mint_user_token(user, t.name, 3600))
    key = (await hub.client.get("/v1/me/push-key", headers=me)).json()["public_key"]
    browser = Browser()
    _sid, endpoint = push.subscribe(browser, key)
    response = await hub.client.post(
        "/v1/me/push-subscriptions", json=browser.subscription(endpoint), headers=me
    )
    assert response.status_code == 201, response.text


async def test_preferences_decide_per_channel_what_a_digest_sends(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
) -> None:
    t = await make_tenant()
    for user in ("eve", "fay", "gus"):
        await _profile(hub, t, user, email=f"{user}@shop.test")
        await _subscribe(hub, t, user, push)
    await _prefs(hub, t, "eve", {"social": {"inbox": True, "push": True, "email": False}})
    await _prefs(hub, t, "fay", {"social": {"inbox": True, "push": False, "email": False}})
    for n in range(4):
        await _publish(
            hub,
            t,
            ["eve", "fay", "gus"],
            n,
            digest=DIGEST,
            category="social",
            channels=["inbox", "email", "push"],
        )
    await workers.run()
    workers.clock.advance(600)
    assert await workers.run() == 2  # eve's and gus's; fay takes neither channel
    async with sessionmaker() as session:
        rows = await session.scalars(select(Delivery).where(Delivery.tenant == t.name))
        sent = sorted((d.definition, d.payload["user"]) for d in rows)
    assert sent == [("email", "gus"), ("push", "eve"), ("push", "gus")]
    assert await _digests(sessionmaker, t, "fay") == []


async def test_two_workers_flushing_at_once_send_one_email(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    clock = Clock()
    users = [f"u{i}" for i in range(30)]
    for user in users:
        await _profile(hub, t, user, email=f"{user}@shop.test")
    one, two = _workers(sessionmaker, clock), _workers(sessionmaker, clock)
    for n in range(5):
        await _publish(hub, t, users, n, digest=DIGEST)
    await asyncio.gather(one.channels.run_once(), two.channels.run_once())
    clock.advance(600)
    closed = await asyncio.gather(one.digests.run_once(), two.digests.run_once())
    assert sum(closed) == 30
    for user in users:
        [email] = await _digest_emails(sessionmaker, t, user)
        assert email.payload["digest"]["count"] == 5


async def test_a_digest_spec_is_validated_at_the_edge(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]]
) -> None:
    t = await make_tenant()
    body = {"tenant": t.name, "recipients": {"users": ["a"]}, "title": "x"}
    bad = [
        {"key": "k", "window_s": "600"},
        {"key": "k", "window_s": 0},
        {"key": "k", "max_items": 0},
        {"key": "k", "mode": "weekly"},
        {"key": "k", "first": "later"},
        {"key": "k", "at": "25:00"},
        {"key": "k", "at": "09:00", "mode": "sliding"},
        {"key": "k", "at": "09:00", "window_s": 60},
        {"key": "has space"},
        {"key": "k", "extra": 1},
        {"window_s": 60},
    ]
    for digest in bad:
        response = await hub.client.post(
            "/v1/notifications", json={**body, "digest": digest}, headers=t.publish
        )
        assert response.status_code == 422, (digest, response.text)
        assert response.headers["content-type"] == "application/problem+json"


async def test_admin_lists_a_users_open_digests_and_cancels_one_audited(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "hal", email="hal@shop.test")
    for n in range(3):
        await _publish(hub, t, ["hal"], n, digest=DIGEST)
    await _publish(hub, t, ["hal"], 9, digest={"key": "other", "window_s": 60})
    await workers.run()
    url = f"/v1/admin/users/{t.name}/hal/digests"
    listed = (await hub.client.get(url, headers=t.admin)).json()["digests"]
    assert [(d["key"], d["items"], d["state"]) for d in listed] == [
        ("other", 1, "open"),
        ("comments:p1", 3, "open"),
    ]
    assert listed[1]["spec"] == {
        **DIGEST,
        "max_items": 50,
        "mode": "fixed",
        "first": "wait",
        "at": None,
    }
    cancelled = await hub.client.delete(f"{url}/{listed[1]['id']}", headers=t.admin)
    assert cancelled.status_code == 204, cancelled.text
    again = await hub.client.delete(f"{url}/{listed[1]['id']}", headers=t.admin)
    assert again.status_code == 404
    assert again.headers["content-type"] == "application/problem+json"

    workers.clock.advance(600)
    assert await workers.run() == 1  # "other" only: the cancelled one is never sent
    [email] = await _digest_emails(sessionmaker, t, "hal")
    assert email.payload["digest"]["key"] == "other"
    entries = (await hub.client.get("/v1/admin/audit", headers=t.admin)).json()["entries"]
    seen = [(e["method"], e["route"], e["status"]) for e in entries]
    route = "/v1/admin/users/{tenant}/{user}/digests/{digest_id}"
    assert ("DELETE", route, 204) in seen and ("DELETE", route, 404) in seen


async def test_the_routing_trace_says_digested(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "ida", email="ida@shop.test")
    traces = hub.app_state["routing_traces"]
    nid = await _publish(hub, t, ["ida"], 0, digest=DIGEST)
    worker = ChannelWorker(workers.channels._units, workers.channels._expander, traces)
    await worker.run_once()
    response = await hub.client.get(
        f"/v1/admin/notifications/{nid}/trace", params={"tenant": t.name}, headers=t.admin
    )
    assert response.status_code == 200, response.text
    [line] = response.json()["lines"]
    assert line["channels"] == {"email": "digested"}


async def test_a_rule_with_a_digest_digests_its_events_and_threads_them(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _profile(hub, t, "ann", email="ann@shop.test")
    digest = {"key": "post-comments", "at": "08:00"}
    rule = {
        "target_type": "post",
        "recipients": [{"relationship": "follower", "title": "{{ actor.id }} commented"}],
        "channels": ["inbox", "email"],
        "digest": digest,
    }
    url = "/v1/admin/rules/commented"
    put = await hub.client.put(url, json=rule, params={"tenant": t.name}, headers=t.admin)
    assert put.status_code == 201, put.text
    shown = {**digest, "window_s": None, "max_items": 50, "mode": "fixed", "first": "wait"}
    assert put.json()["digest"] == shown
    got = await hub.client.get(url, params={"tenant": t.name}, headers=t.admin)
    assert got.json()["digest"] == put.json()["digest"]
    relate = {"tenant": t.name, "user": "ann", "relationship": "follower"}
    relate["target"] = {"type": "post", "id": "p1"}  # type: ignore[assignment]
    response = await hub.client.post("/v1/relationships", json=relate, headers=t.publish)
    assert response.status_code == 204, response.text
    for actor in ("bob", "cy", "bob"):
        event = {
            "tenant": t.name,
            "rule": "commented",
            "actor": {"id": actor},
            "target": {"type": "post", "id": "p1"},
        }
        response = await hub.client.post("/v1/events", json=event, headers=t.publish)
        assert response.status_code == 202, response.text
    await workers.run()  # 09:00 UTC: the user has no zone, so 08:00 UTC tomorrow
    workers.clock.now = datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    assert await workers.run() == 1
    [email] = await _digest_emails(sessionmaker, t, "ann")
    assert email.payload["digest"]["count"] == 3
    assert [a["id"] for a in email.payload["digest"]["actors"]] == ["bob", "cy"]
    [item] = await _inbox(hub, t, "ann")
    assert item["thread_key"] == "digest:post-comments"
    assert item["thread"]["activity_count"] == 3


BERLIN = ZoneInfo("Europe/Berlin")
NIGHTS = {"mon-sun": ["22:00", "07:00"]}


async def _flush_all(sessionmaker: async_sessionmaker[AsyncSession], clock: Clock) -> Flushed:
    """Every digest due at `clock`, sent as the digest worker sends them (quiet hours
    judged at the same instant); what came of each."""
    sender = DigestSender(ChannelRows(quiet=QuietHours(clock)), clock)
    closed, added = 0, 0
    outcomes: dict[str, dict[str, str]] = {}
    while True:
        async with UnitOfWork(sessionmaker) as unit:
            flushed = await sender.send_due(unit)
        if not flushed.closed:
            return Flushed(closed, added, outcomes)
        closed, added = closed + flushed.closed, added + flushed.added
        outcomes |= flushed.outcomes


async def test_a_digest_closing_in_quiet_hours_is_held_until_they_end_then_sent_once(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
    smtp: Smtp,
) -> None:
    quiet_t, plain_t = await make_tenant(), await make_tenant()
    await _profile(
        hub, quiet_t, "ann", email="ann@quiet.test", time_zone="Europe/Berlin", quiet=NIGHTS
    )
    await _profile(hub, plain_t, "ann", email="ann@plain.test")  # the same name, no quiet
    tomorrow = datetime.now(BERLIN).date() + timedelta(days=1)
    workers.clock.now = datetime.combine(tomorrow, time(21, 55), BERLIN).astimezone(UTC)
    end = datetime.combine(tomorrow + timedelta(days=1), time(7, 0), BERLIN).astimezone(UTC)
    for t in (quiet_t, plain_t):
        for n in range(3):
            await _publish(hub, t, ["ann"], n, digest=DIGEST)
    await workers.channels.run_once()  # 21:55: not quiet yet; the digests open

    workers.clock.advance(600)  # 22:05: the window closes in ann's quiet hours
    flushed = await _flush_all(sessionmaker, workers.clock)
    [held] = await _digest_emails(sessionmaker, quiet_t, "ann")
    [sent] = await _digest_emails(sessionmaker, plain_t, "ann")
    assert held.payload["digest"]["count"] == sent.payload["digest"]["count"] == 3
    until = to_rfc3339(end)
    assert flushed.outcomes[held.payload["notification"]["id"]] == {
        "email": f"e-mailed, held for quiet hours until {until}"
    }
    assert flushed.outcomes[sent.payload["notification"]["id"]] == {"email": "e-mailed"}
    assert held.next_attempt_at == end
    assert sent.next_attempt_at < end

    # The hub's dispatcher sends the other tenant's at once, never the held one early.
    await wait_status(hub.client, _key(plain_t), sent.id, "sent", tenant=plain_t.name)
    assert smtp.of(held.id) == []
    async with UnitOfWork(sessionmaker) as unit:  # the night passes: it falls due
        await unit.session.execute(
            update(Delivery)
            .where(Delivery.id == held.id)
            .values(next_attempt_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    await wait_status(hub.client, _key(quiet_t), held.id, "sent", tenant=quiet_t.name)
    [(rcpt, _message)] = smtp.of(held.id)
    assert rcpt == ["ann@quiet.test"]
    workers.clock.advance(86_400)
    assert (
        held.payload["notification"]["id"]
        not in (await _flush_all(sessionmaker, workers.clock)).outcomes
    )
    assert len(await _digest_emails(sessionmaker, quiet_t, "ann")) == 1  # once


def _key(t: Tenant) -> str:
    """The tenant's publish key (for the deliveries' status)."""
    return t.publish["Authorization"].removeprefix("Bearer ")


async def test_a_digest_whose_stored_item_does_not_read_holds_back_only_itself(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    workers: Workers,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """One digest whose stored item no longer reads (a severity written by hand or by an
    older hub) used to fail the digest worker's whole transaction at every pass: no digest
    of any user was sent again. Now it waits alone (logged), taking no more items."""
    t = await make_tenant()
    for user in ("ann", "bob"):
        await _profile(hub, t, user, email=f"{user}@shop.test")
    await _publish(hub, t, ["ann", "bob"], 1, digest=DIGEST)
    assert await workers.run() == 0
    [ann] = await _digests(sessionmaker, t, "ann")
    async with sessionmaker.begin() as session:
        await session.execute(
            update(DigestItem)
            .where(DigestItem.digest_id == ann.id)
            .values(item=DigestItem.item.op("||")(literal({"severity": "bogus"}, JSONB)))
        )

    workers.clock.advance(600)
    assert await workers.run() == 2  # both claimed: bob's sent, ann's put off
    [email] = await _digest_emails(sessionmaker, t, "bob")
    assert email.payload["digest"]["count"] == 1
    assert await _digest_emails(sessionmaker, t, "ann") == []
    [held] = await _digests(sessionmaker, t, "ann")
    assert (held.id, held.state) == (ann.id, "full")
    assert held.due_at > workers.clock.now

    await _publish(hub, t, ["ann"], 2, digest=DIGEST)  # a new digest, not the broken one
    assert await workers.run() == 0
    assert [(d.id == ann.id, d.item_count) for d in await _digests(sessionmaker, t, "ann")] == [
        (True, 1),
        (False, 1),
    ]
