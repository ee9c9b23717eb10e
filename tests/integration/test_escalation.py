"""Escalation (issue 41 item 1): a publish's, a rule's or the tenant's default steps send
an e-mail or Web Push later unless the user's copy was seen, read or archived by then (or
is gone). The steps run through an `EscalationRunner` whose clock the test moves ahead
(the hub's own worker, on the real clock, never reaches steps this far ahead)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from test_channels import Tenant, _auth, new_tenant

from notifyhub.db.models import AuditEntry, Delivery, Escalation, EscalationDefault
from notifyhub.db.unit import UnitOfWork, units
from notifyhub.domain.auth import Scope, ServicePrincipal
from notifyhub.domain.escalation import Step
from notifyhub.domain.notification import Draft, Recipients, to_rfc3339
from notifyhub.services.channel_rows import ChannelRows
from notifyhub.services.escalation import EscalationDefaults, EscalationRunner
from notifyhub.services.escalation_sends import StepSender
from notifyhub.services.quiet_hours import QuietHours
from notifyhub.settings import Settings
from notifyhub.store.escalation import EscalationCheck
from notifyhub.store.keys import Keys
from notifyhub.workers.escalation import EscalationWorker
from support.pushservice import PushService
from support.smtp import Smtp, smtp_settings
from support.webpush import Browser

Headers = dict[str, str]
STEPS = [
    {"after_s": 300, "unless": "seen", "channel": "push"},
    {"after_s": 3600, "unless": "read", "channel": "email"},
]


@pytest.fixture
def settings(settings: Settings, smtp: Smtp) -> Settings:
    return smtp_settings(
        settings,
        smtp,
        jitter=0.0,
        channel_interval_s=3600,
    )


@pytest.fixture
async def make_tenant(
    create_key: Callable[..., Awaitable[str]],
) -> Callable[[], Awaitable[Tenant]]:
    return lambda: new_tenant(create_key, "esc")


class Clock:
    """The runner's now: real time plus what the test moved it ahead by."""

    def __init__(self) -> None:
        self.ahead = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.ahead


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def run(
    hub: Any, settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], clock: Clock
) -> Callable[[float], Awaitable[int]]:
    """Run the steps due `seconds` from now (the clock moved there)."""
    state = hub.app_state
    check = EscalationCheck(state["redis"], Keys(settings.redis_prefix), 1000)
    sender = StepSender(ChannelRows(quiet=QuietHours(clock)))  # quiet hours on its clock
    runner = EscalationRunner(check, sender, state["routing_traces"], clock=clock)
    worker = EscalationWorker(units(sessionmaker), runner)

    async def at(seconds: float) -> int:
        clock.ahead = timedelta(seconds=seconds)
        return await worker.run_once()

    return at


async def _user(hub: Any, t: Tenant, user: str, push: PushService) -> Headers:
    """The user with an address and one browser subscribed; their token's headers."""
    url = f"/v1/admin/users/{t.name}/{user}"
    response = await hub.client.put(url, json={"email": f"{user}@shop.test"}, headers=t.admin)
    assert response.status_code in (200, 201), response.text
    me = _auth(hub.tokens.mint_user_token(user, t.name, 3600))
    key = (await hub.client.get("/v1/me/push-key", headers=me)).json()["public_key"]
    browser = Browser()
    _sid, endpoint = push.subscribe(browser, key)
    body = browser.subscription(endpoint)
    response = await hub.client.post("/v1/me/push-subscriptions", json=body, headers=me)
    assert response.status_code == 201, response.text
    return me


async def _publish(hub: Any, t: Tenant, users: list[str], **extra: Any) -> str:
    body = {"tenant": t.name, "recipients": {"users": users}, "title": "Dock 4 blocked"}
    response = await hub.client.post("/v1/notifications", json={**body, **extra}, headers=t.publish)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _sent(sessionmaker: async_sessionmaker[AsyncSession], nid: str) -> list[tuple[str, str]]:
    """(definition, user) of the notification's deliveries, sorted."""
    async with sessionmaker() as session:
        rows = await session.scalars(
            select(Delivery).where(Delivery.payload["notification"]["id"].astext == nid)
        )
        return sorted((d.definition, d.payload["user"]) for d in rows)


async def _trace(hub: Any, t: Tenant, nid: str) -> dict[str, dict[str, str]]:
    response = await hub.client.get(
        f"/v1/admin/notifications/{nid}/trace", params={"tenant": t.name}, headers=t.admin
    )
    assert response.status_code == 200, response.text
    return {line["user"]: line["channels"] for line in response.json()["lines"]}


async def _patch(hub: Any, me: Headers, nid: str, **change: bool) -> None:
    response = await hub.client.patch(f"/v1/me/notifications/{nid}", json=change, headers=me)
    assert response.status_code == 200, response.text


async def test_steps_fire_when_due_and_a_read_before_cancels_the_rest(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    run: Callable[[float], Awaitable[int]],
) -> None:
    t = await make_tenant()
    await _user(hub, t, "ann", push)
    bob = await _user(hub, t, "bob", push)
    nid = await _publish(hub, t, ["ann", "bob"], escalate=STEPS)

    assert await run(290) == 0  # nothing due yet
    assert await _sent(sessionmaker, nid) == []
    assert await run(301) == 2  # the push step of both
    assert await _sent(sessionmaker, nid) == [("push", "ann"), ("push", "bob")]
    assert await run(400) == 0  # each step runs once

    await _patch(hub, bob, nid, read=True)
    assert await run(3601) == 2
    assert await _sent(sessionmaker, nid) == [("email", "ann"), ("push", "ann"), ("push", "bob")]

    trace = await _trace(hub, t, nid)
    assert trace["ann"]["escalate 1"].startswith("push due ")
    assert trace["ann"]["escalate 1"].endswith(": pushed to 1 browser")
    assert trace["ann"]["escalate 2"].endswith(": e-mailed")
    assert " cancelled by read at " in trace["bob"]["escalate 2"]
    assert trace["bob"]["escalate 2"].endswith("Z")


async def test_seen_read_and_archived_each_cancel_their_own_steps(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    run: Callable[[float], Awaitable[int]],
) -> None:
    t = await make_tenant()
    me = await _user(hub, t, "ann", push)
    steps = {
        unless: [{"after_s": 300, "unless": unless, "channel": "email"}]
        for unless in ("seen", "read", "archived")
    }
    seen = {u: await _publish(hub, t, ["ann"], escalate=s) for u, s in steps.items()}
    read = {u: await _publish(hub, t, ["ann"], escalate=s) for u, s in steps.items()}
    archived = {u: await _publish(hub, t, ["ann"], escalate=s) for u, s in steps.items()}
    for nid in seen.values():
        await _patch(hub, me, nid, seen=True)
    for nid in read.values():
        await _patch(hub, me, nid, read=True)
    for nid in archived.values():
        await _patch(hub, me, nid, archived=True)

    assert await run(301) == 9
    e_mailed = {
        (state, unless)
        for state, published in (("seen", seen), ("read", read), ("archived", archived))
        for unless, nid in published.items()
        if await _sent(sessionmaker, nid)
    }
    # Seen cancels `unless: seen` only; read cancels seen and read; archived, archived.
    assert e_mailed == {
        ("seen", "read"),
        ("seen", "archived"),
        ("read", "archived"),
        ("archived", "seen"),
        ("archived", "read"),
    }
    assert (await _trace(hub, t, seen["seen"]))["ann"]["escalate 1"].endswith("cancelled by seen")
    assert (await _trace(hub, t, archived["archived"]))["ann"]["escalate 1"].endswith(
        "cancelled by archive"
    )


async def test_deleted_recalled_and_expired_copies_send_nothing(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    run: Callable[[float], Awaitable[int]],
) -> None:
    t = await make_tenant()
    me = await _user(hub, t, "ann", push)
    steps = [{"after_s": 300, "unless": "read", "channel": "email"}]
    deleted = await _publish(hub, t, ["ann"], escalate=steps)
    recalled = await _publish(hub, t, ["ann"], escalate=steps)
    expired = await _publish(hub, t, ["ann"], escalate=steps, ttl=200)
    kept = await _publish(hub, t, ["ann"], escalate=steps)
    response = await hub.client.delete(f"/v1/me/notifications/{deleted}", headers=me)
    assert response.status_code == 204, response.text
    response = await hub.client.delete(
        f"/v1/notifications/{recalled}", params={"tenant": t.name}, headers=t.publish
    )
    assert response.is_success, response.text

    assert await run(301) == 4
    for nid in (deleted, recalled, expired):
        assert await _sent(sessionmaker, nid) == []
    assert await _sent(sessionmaker, kept) == [("email", "ann")]
    async with sessionmaker() as session:
        rows = await session.scalars(
            select(Escalation).where(Escalation.tenant == t.name).order_by(Escalation.id)
        )
        outcomes = {r.notification_id: (r.status, r.outcome) for r in rows}
    assert outcomes[deleted][0] == outcomes[recalled][0] == "skipped"
    assert "gone" in str(outcomes[deleted][1])
    assert outcomes[expired] == ("skipped", "skipped: the notification expired")
    assert outcomes[kept] == ("sent", "e-mailed")


async def _deliveries(sessionmaker: async_sessionmaker[AsyncSession], nid: str) -> list[Delivery]:
    async with sessionmaker() as session:
        rows = await session.scalars(
            select(Delivery).where(Delivery.payload["notification"]["id"].astext == nid)
        )
        return list(rows)


async def test_a_step_due_in_quiet_hours_is_held_until_they_end_but_critical_is_not(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    run: Callable[[float], Awaitable[int]],
) -> None:
    """Quiet from a minute or two from now for two hours (UTC): the steps due in five
    minutes fall inside; the same user name in another tenant has no quiet hours."""
    quiet_t, plain_t = await make_tenant(), await make_tenant()
    await _user(hub, quiet_t, "ann", push)
    await _user(hub, plain_t, "ann", push)
    start = (datetime.now(UTC) + timedelta(minutes=2)).replace(second=0, microsecond=0)
    end = start + timedelta(hours=2)
    window = [f"{start:%H:%M}", f"{end:%H:%M}"]
    profile = {"time_zone": "UTC", "quiet": {"mon-sun": window}}
    url = f"/v1/admin/users/{quiet_t.name}/ann"
    response = await hub.client.put(url, json=profile, headers=quiet_t.admin)
    assert response.status_code == 200, response.text
    steps = [{"after_s": 300, "unless": "read", "channel": "email"}]
    both = [{**steps[0], "channel": "push"}, *steps]
    held = await _publish(hub, quiet_t, ["ann"], escalate=both)
    critical = await _publish(hub, quiet_t, ["ann"], escalate=steps, severity="critical")
    plain = await _publish(hub, plain_t, ["ann"], escalate=steps)

    assert await run(301) == 4
    until = to_rfc3339(end)
    outcomes = (await _trace(hub, quiet_t, held))["ann"]
    assert outcomes["escalate 1"].endswith(
        f": pushed to 1 browser, held for quiet hours until {until}"
    )
    assert outcomes["escalate 2"].endswith(f": e-mailed, held for quiet hours until {until}")
    assert (await _trace(hub, quiet_t, critical))["ann"]["escalate 1"].endswith(": e-mailed")
    assert (await _trace(hub, plain_t, plain))["ann"]["escalate 1"].endswith(": e-mailed")
    assert {d.definition: d.next_attempt_at for d in await _deliveries(sessionmaker, held)} == {
        "push": end,
        "email": end,
    }
    for nid in (critical, plain):  # due at once (a claim may have moved it a lease on)
        [delivery] = await _deliveries(sessionmaker, nid)
        assert delivery.next_attempt_at < end
    assert await run(400) == 0  # each step ran once


async def test_a_step_whose_inbox_is_not_in_redis_waits_instead_of_skipping(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    run: Callable[[float], Awaitable[int]],
    settings: Settings,
) -> None:
    """A Redis that lost the user's inbox (not rebuilt yet) says nothing about the copy:
    the step is asked again later, not skipped."""
    t = await make_tenant()
    await _user(hub, t, "ann", push)
    nid = await _publish(hub, t, ["ann"], escalate=[STEPS[1]])
    keys = Keys(settings.redis_prefix).inbox_list(t.name, "ann")
    saved = {k: await hub.app_state["redis"].dump(k) for k in keys}
    await hub.app_state["redis"].delete(*keys)
    assert await run(3601) == 0
    async with sessionmaker() as session:
        [row] = await session.scalars(select(Escalation).where(Escalation.notification_id == nid))
        assert row.status == "pending"
    for key, value in saved.items():  # rebuilt
        if value is not None:
            await hub.app_state["redis"].restore(key, 0, value)
    assert await run(3700) == 1
    assert await _sent(sessionmaker, nid) == [("email", "ann")]


async def test_a_rule_escalates_its_notifications(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    run: Callable[[float], Awaitable[int]],
) -> None:
    t = await make_tenant()
    await _user(hub, t, "ann", push)
    rule = {
        "target_type": "post",
        "recipients": [{"relationship": "follower", "title": "New comment"}],
        "escalate": [STEPS[1]],
    }
    put = await hub.client.put(
        "/v1/admin/rules/commented", json=rule, params={"tenant": t.name}, headers=t.admin
    )
    assert put.status_code == 201, put.text
    assert put.json()["escalate"] == [STEPS[1]]
    got = await hub.client.get(
        "/v1/admin/rules/commented", params={"tenant": t.name}, headers=t.admin
    )
    assert got.json()["escalate"] == [STEPS[1]]
    relate = {"tenant": t.name, "user": "ann", "relationship": "follower"}
    relate["target"] = {"type": "post", "id": "p1"}  # type: ignore[assignment]
    response = await hub.client.post("/v1/relationships", json=relate, headers=t.publish)
    assert response.status_code == 204, response.text
    event = {
        "tenant": t.name,
        "rule": "commented",
        "actor": {"id": "bob"},
        "target": {"type": "post", "id": "p1"},
    }
    response = await hub.client.post("/v1/events", json=event, headers=t.publish)
    assert response.status_code == 202, response.text

    assert await run(3601) == 1
    async with sessionmaker() as session:
        [row] = await session.scalars(select(Escalation).where(Escalation.tenant == t.name))
    assert (row.user_id, row.channel, row.status) == ("ann", "email", "sent")


async def test_defaults_that_name_no_steps_create_nothing(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]]
) -> None:
    """A category with no steps is dropped: PUTting only such, on a tenant with none,
    creates nothing (200, not 201); the first PUT with steps is the one that creates."""
    t = await make_tenant()
    url, params = "/v1/admin/escalation-defaults", {"tenant": t.name}
    empty = await hub.client.put(
        url, params=params, json={"categories": {"incident": []}}, headers=t.admin
    )
    assert empty.status_code == 200, empty.text
    assert empty.json() == {"tenant": t.name, "categories": {}}
    body = {"categories": {"incident": [STEPS[1]]}}
    created = await hub.client.put(url, params=params, json=body, headers=t.admin)
    assert created.status_code == 201, created.text


async def test_tenant_defaults_apply_per_category_and_stay_in_their_tenant(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    run: Callable[[float], Awaitable[int]],
) -> None:
    a, b = await make_tenant(), await make_tenant()
    await _user(hub, a, "ann", push)
    await _user(hub, b, "ann", push)
    body = {"categories": {"incident": [STEPS[1]]}}
    put = await hub.client.put(
        "/v1/admin/escalation-defaults", params={"tenant": a.name}, json=body, headers=a.admin
    )
    assert put.status_code == 201, put.text
    again = await hub.client.put(
        "/v1/admin/escalation-defaults", params={"tenant": a.name}, json=body, headers=a.admin
    )
    assert again.status_code == 200, again.text
    got = await hub.client.get(
        "/v1/admin/escalation-defaults", params={"tenant": a.name}, headers=a.admin
    )
    assert got.json() == {"tenant": a.name, "categories": {"incident": [STEPS[1]]}}
    # Tenant b sees none of a's, and a's key cannot read or change b's.
    got_b = await hub.client.get(
        "/v1/admin/escalation-defaults", params={"tenant": b.name}, headers=b.admin
    )
    assert got_b.json() == {"tenant": b.name, "categories": {}}
    for method in ("GET", "PUT"):
        response = await hub.client.request(
            method,
            "/v1/admin/escalation-defaults",
            params={"tenant": b.name},
            json=body if method == "PUT" else None,
            headers=a.admin,
        )
        assert response.status_code == 403, response.text

    by_default = await _publish(hub, a, ["ann"], category="incident")
    other_category = await _publish(hub, a, ["ann"], category="restock")
    own_steps = await _publish(hub, a, ["ann"], category="incident", escalate=[STEPS[0]])
    in_b = await _publish(hub, b, ["ann"], category="incident")
    assert await run(3601) == 2
    assert await _sent(sessionmaker, by_default) == [("email", "ann")]
    assert await _sent(sessionmaker, own_steps) == [("push", "ann")]
    assert await _sent(sessionmaker, other_category) == []
    assert await _sent(sessionmaker, in_b) == []


async def test_operators_list_and_cancel_a_users_pending_steps_in_their_tenant_only(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    run: Callable[[float], Awaitable[int]],
) -> None:
    a, b = await make_tenant(), await make_tenant()
    await _user(hub, a, "ann", push)
    nid = await _publish(hub, a, ["ann"], escalate=STEPS)
    url = f"/v1/admin/users/{a.name}/ann/escalations"
    listed = await hub.client.get(url, headers=a.admin)
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert [(i["notification_id"], i["step"], i["channel"]) for i in items] == [
        (nid, 1, "push"),
        (nid, 2, "email"),
    ]
    # Another tenant's key: 403 on a's user; on its own tenant, a's step is not there.
    assert (await hub.client.get(url, headers=b.admin)).status_code == 403
    first = items[0]["id"]
    assert (await hub.client.delete(f"{url}/{first}", headers=b.admin)).status_code == 403
    other = f"/v1/admin/users/{b.name}/ann/escalations"
    assert (await hub.client.get(other, headers=b.admin)).json() == {"items": []}
    assert (await hub.client.delete(f"{other}/{first}", headers=b.admin)).status_code == 404

    cancelled = await hub.client.delete(f"{url}/{first}", headers=a.admin)
    assert cancelled.status_code == 204, cancelled.text
    assert (await hub.client.delete(f"{url}/{first}", headers=a.admin)).status_code == 404
    left = (await hub.client.get(url, headers=a.admin)).json()["items"]
    assert [i["step"] for i in left] == [2]
    assert await run(3601) == 1
    assert await _sent(sessionmaker, nid) == [("email", "ann")]
    async with sessionmaker() as session:
        audited = await session.scalars(
            select(AuditEntry).where(AuditEntry.tenant == a.name, AuditEntry.method == "DELETE")
        )
        entries = [(e.route, e.target, e.status) for e in audited]
    route = "/v1/admin/users/{tenant}/{user}/escalations/{escalation_id}"
    assert (route, f"{a.name}/ann/{first}", 204) in entries, entries


async def test_escalate_is_validated_at_the_edge(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]]
) -> None:
    t = await make_tenant()
    body = {"tenant": t.name, "recipients": {"users": ["ann"]}, "title": "x"}
    for escalate, where in (
        ([{"after_s": 0, "unless": "seen", "channel": "push"}], "after_s"),
        ([{"after_s": "60", "unless": "seen", "channel": "push"}], "after_s"),
        ([{"after_s": 60, "unless": "clicked", "channel": "push"}], "unless"),
        ([{"after_s": 60, "unless": "seen", "channel": "sms"}], "channel"),
        ([{"after_s": 60, "unless": "seen", "channel": "push", "x": 1}], "x"),
        ([{"after_s": 60 + i, "unless": "seen", "channel": "push"} for i in range(6)], "escalate"),
    ):
        response = await hub.client.post(
            "/v1/notifications", json={**body, "escalate": escalate}, headers=t.publish
        )
        assert response.status_code == 422, (escalate, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert where in response.text


class _NoDatabase:
    def __call__(self) -> AsyncSession:
        raise AssertionError("PostgreSQL was used")


async def test_a_publish_without_steps_needs_no_postgresql(hub: Any) -> None:
    ingest = hub.app_state["ingest"]
    principal = ServicePrincipal("k", "k", Scope.PUBLISH, None)

    async def publish(draft: Draft) -> None:
        async with UnitOfWork(_NoDatabase()) as unit:  # type: ignore[arg-type]
            await ingest.publish(unit, principal, draft, Recipients(users=("ann",)))

    await publish(Draft(title="inbox only", category="incident"))
    step = Step(after_s=60, unless="read", channel="email")
    with pytest.raises(AssertionError, match="PostgreSQL was used"):
        await publish(Draft(title="escalated", escalate=(step,)))


async def test_only_a_publish_with_channels_wakes_the_channel_worker(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]]
) -> None:
    """Steps alone leave the channel worker asleep (it has no send to claim); a publish
    with channels wakes it once committed."""
    t = await make_tenant()
    woken: list[None] = []
    hub.app_state["ingest"].on_channel_send(lambda: woken.append(None))
    await _publish(hub, t, ["ann"], escalate=STEPS)
    assert woken == []
    await _publish(hub, t, ["ann"], channels=["inbox", "email"])
    assert woken == [None]


async def test_unreadable_stored_defaults_stop_neither_the_worker_nor_other_tenants(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    settings: Settings,
    clock: Clock,
) -> None:
    """A tenant's default steps that no longer read as steps (written by hand or by an
    older hub) are left out, logged: the worker's reload used to raise on them at every
    pass, so no tenant's step ran again, and their tenant's GET answered 500."""
    a, b = await make_tenant(), await make_tenant()
    await _user(hub, a, "ann", push)
    body = {"categories": {"incident": [STEPS[1]]}}
    put = await hub.client.put(
        "/v1/admin/escalation-defaults", params={"tenant": a.name}, json=body, headers=a.admin
    )
    assert put.status_code == 201, put.text
    bad = [{"after_s": 0, "unless": "nope", "channel": "fax"}]
    async with sessionmaker.begin() as session:
        session.add(EscalationDefault(tenant=b.name, category="oops", steps=bad))
    try:
        got = await hub.client.get(
            "/v1/admin/escalation-defaults", params={"tenant": b.name}, headers=b.admin
        )
        assert got.status_code == 200, got.text
        assert got.json() == {"tenant": b.name, "categories": {}}

        nid = await _publish(hub, a, ["ann"], escalate=[STEPS[0]])
        state = hub.app_state
        check = EscalationCheck(state["redis"], Keys(settings.redis_prefix), 1000)
        sender = StepSender(ChannelRows(quiet=QuietHours(clock)))
        defaults = EscalationDefaults(ttl_s=0)  # reloaded at every pass
        runner = EscalationRunner(check, sender, defaults=defaults, clock=clock)
        worker = EscalationWorker(units(sessionmaker), runner)
        clock.ahead = timedelta(seconds=301)
        assert await worker.run_once() == 1
        assert await _sent(sessionmaker, nid) == [("push", "ann")]
        assert defaults.steps_for(a.name, "incident") == (Step(**STEPS[1]),)
        assert defaults.steps_for(b.name, "oops") == ()
    finally:
        async with sessionmaker.begin() as session:
            await session.execute(
                delete(EscalationDefault).where(EscalationDefault.tenant == b.name)
            )


async def test_a_step_whose_stored_notification_does_not_read_holds_back_only_itself(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
    run: Callable[[float], Awaitable[int]],
) -> None:
    """Steps whose stored notification no longer reads (a severity or expiry written by
    hand or by an older hub) used to fail the whole pass, or every step sent with them,
    at every try: now each of them waits alone (logged) while the others are sent."""
    t = await make_tenant()
    for user in ("ann", "bob", "cid"):
        await _user(hub, t, user, push)
    nid = await _publish(hub, t, ["ann", "bob", "cid"], escalate=[STEPS[1]])
    broken = {"ann": {"severity": "bogus"}, "bob": {"expires_at": "not a time"}}
    async with sessionmaker.begin() as session:
        for user, fields in broken.items():
            row = await session.scalar(
                select(Escalation).where(
                    Escalation.notification_id == nid, Escalation.user_id == user
                )
            )
            assert row is not None
            row.notification = {**row.notification, **fields}

    assert await run(3601) == 2  # cid's is sent; bob's unreadable expiry is not "expired"
    assert await _sent(sessionmaker, nid) == [("email", "bob"), ("email", "cid")]
    async with sessionmaker() as session:
        rows = await session.scalars(select(Escalation).where(Escalation.notification_id == nid))
        statuses = {r.user_id: r.status for r in rows}
    assert statuses == {"ann": "pending", "bob": "sent", "cid": "sent"}
    assert await run(3700) == 0  # ann's waits alone, tried again later
