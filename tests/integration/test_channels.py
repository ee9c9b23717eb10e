"""Channels beyond the inbox (issue 37 items 3 and 4): a publish or a rule naming `email`
and `push` writes one channel send; the channel worker (driven by `run_once` here)
expands it into outbox deliveries by the users' preference matrix, addresses and
browsers' subscriptions, and notes each user's outcome in the routing trace."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import ChannelSend, Delivery
from notifyhub.db.unit import UnitOfWork, units
from notifyhub.domain.auth import Scope, ServicePrincipal
from notifyhub.domain.notification import Draft, Recipients
from notifyhub.services.channel_rows import ChannelRows, push_topic
from notifyhub.services.channels import ChannelExpander
from notifyhub.settings import Settings
from notifyhub.workers.channels import ChannelWorker
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
        channel_interval_s=3600,  # driven by run_once (a publish still wakes it)
    )


@pytest.fixture
def hub(hub: Any) -> Any:
    """The hub, its channel worker woken by nothing but the test's `run_once` calls."""
    hub.app_state["ingest"].on_channel_send(lambda: None)
    return hub


def _auth(key: str) -> Headers:
    return {"Authorization": f"Bearer {key}"}


@dataclass
class Tenant:
    """A fresh tenant with its own bound keys."""

    name: str
    publish: Headers
    admin: Headers


async def new_tenant(create_key: Callable[..., Awaitable[str]], prefix: str) -> Tenant:
    """A tenant named `<prefix>-<random>` with a publish and an admin key bound to it
    (the channel, quiet-hours and escalation tests' tenants)."""
    name = f"{prefix}-{secrets.token_hex(4)}"
    publish = _auth(await create_key(f"{name}-p", "publish", name))
    admin = _auth(await create_key(f"{name}-a", "admin", name))
    return Tenant(name, publish, admin)


@pytest.fixture
async def make_tenant(
    create_key: Callable[..., Awaitable[str]],
) -> Callable[[], Awaitable[Tenant]]:
    return lambda: new_tenant(create_key, "ch")


async def _address(hub: Any, t: Tenant, user: str, email: str) -> None:
    """The user's e-mail address, as the tenant's admin sets it."""
    url = f"/v1/admin/users/{t.name}/{user}"
    response = await hub.client.put(url, json={"email": email}, headers=t.admin)
    assert response.status_code in (200, 201), response.text


async def _subscribe(hub: Any, t: Tenant, user: str, n: int, push: PushService) -> dict[str, str]:
    """`n` browsers of the user subscribe to Web Push at the local push service; their
    subscriptions' ids at the hub -> at the push service."""
    me = _auth(hub.tokens.mint_user_token(user, t.name, 3600))
    key = (await hub.client.get("/v1/me/push-key", headers=me)).json()["public_key"]
    ids = {}
    for _ in range(n):
        browser = Browser()
        sid, endpoint = push.subscribe(browser, key)
        body = browser.subscription(endpoint)
        response = await hub.client.post("/v1/me/push-subscriptions", json=body, headers=me)
        assert response.status_code == 201, response.text
        ids[str(response.json()["id"])] = sid
    return ids


async def _deliveries(
    sessionmaker: async_sessionmaker[AsyncSession], notification_id: str
) -> list[Delivery]:
    async with sessionmaker() as session:
        rows = await session.scalars(
            select(Delivery).where(Delivery.payload["notification"]["id"].astext == notification_id)
        )
        return list(rows)


async def _publish(hub: Any, t: Tenant, users: list[str], **extra: Any) -> str:
    body = {"tenant": t.name, "recipients": {"users": users}, "title": "Dock 4 blocked"}
    response = await hub.client.post("/v1/notifications", json={**body, **extra}, headers=t.publish)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _run(hub: Any) -> int:
    """One pass of the hub's channel worker."""
    return int(await hub.app_state["runner"].loop("channels").step())


async def _trace(hub: Any, t: Tenant, notification_id: str) -> dict[str, dict[str, str]]:
    response = await hub.client.get(
        f"/v1/admin/notifications/{notification_id}/trace",
        params={"tenant": t.name},
        headers=t.admin,
    )
    assert response.status_code == 200, response.text
    return {line["user"]: line["channels"] for line in response.json()["lines"]}


async def _fire(hub: Any, t: Tenant, rule: str, data: Any) -> httpx.Response:
    """Ann follows post p1, then bob acts on it: `rule`'s event with `data`."""
    relate = {"tenant": t.name, "user": "ann", "relationship": "follower"}
    relate["target"] = {"type": "post", "id": "p1"}
    response = await hub.client.post("/v1/relationships", json=relate, headers=t.publish)
    assert response.status_code == 204, response.text
    event = {"tenant": t.name, "rule": rule, "actor": {"id": "bob"}, "data": data}
    event["target"] = {"type": "post", "id": "p1"}
    return await hub.client.post("/v1/events", json=event, headers=t.publish)


async def _prefs(hub: Any, t: Tenant, user: str, categories: dict[str, Any]) -> None:
    token = hub.tokens.mint_user_token(user, t.name, 3600)
    response = await hub.client.put(
        "/v1/me/preferences", json={"categories": categories}, headers=_auth(token)
    )
    assert response.status_code == 200, response.text


async def test_email_and_push_to_three_users_make_exactly_the_expected_deliveries(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    smtp: Smtp,
    push: PushService,
) -> None:
    t = await make_tenant()
    await _address(hub, t, "bob", "bob@shop.test")
    await _address(hub, t, "cy", "cy@shop.test")
    await _subscribe(hub, t, "ann", 1, push)
    cy_subs = await _subscribe(hub, t, "cy", 2, push)
    await _prefs(hub, t, "bob", {"dock": {"inbox": True, "push": True, "email": False}})

    nid = await _publish(
        hub,
        t,
        ["ann", "bob", "cy"],
        category="dock",
        severity="error",
        thread_key="dock:4",
        ttl=600,
        channels=["inbox", "email", "push"],
    )
    await _run(hub)

    found = await _deliveries(sessionmaker, nid)
    kinds = sorted((d.definition, d.payload["user"]) for d in found)
    assert kinds == [("email", "cy"), ("push", "ann"), ("push", "cy"), ("push", "cy")]
    pushes = {d.payload["subscription_id"]: d.payload for d in found if d.definition == "push"}
    assert set(cy_subs) <= set(pushes)
    for payload in pushes.values():
        assert payload["urgency"] == "high"
        assert 0 < payload["ttl_s"] <= 600
        assert payload["topic"] == push_topic({"thread_key": "dock:4"})
        assert len(payload["topic"]) <= 32
        assert payload["notification"]["id"] == nid
    assert await _trace(hub, t, nid) == {
        "ann": {"email": "skipped: no address", "push": "pushed to 1 browser"},
        "bob": {"email": "skipped: preference", "push": "skipped: no subscription"},
        "cy": {"email": "e-mailed", "push": "pushed to 2 browsers"},
    }
    [email] = [d for d in found if d.definition == "email"]
    await wait_status(hub.client, t.publish["Authorization"][7:], email.id, "sent", tenant=t.name)
    [(rcpt, message)] = smtp.of(email.id)
    assert rcpt == ["cy@shop.test"]
    assert message["Subject"] == "Dock 4 blocked"
    for sid in cy_subs.values():  # sent: encrypted, VAPID-signed, with the headers
        [pushed] = await push.wait_for(sid, 1)
        assert pushed.status == 201, pushed.refusal
        assert pushed.message["title"] == "Dock 4 blocked" and pushed.message["id"] == nid
        assert pushed.headers["urgency"] == "high"
        assert pushed.headers["topic"] == push_topic({"thread_key": "dock:4"})
        assert 0 < int(pushed.headers["ttl"]) <= 600

    listed = await hub.client.get(
        "/v1/admin/deliveries", params={"tenant": t.name, "notification": nid}, headers=t.admin
    )
    assert listed.status_code == 200, listed.text
    assert {d["id"] for d in listed.json()["deliveries"]} == {d.id for d in found}


async def test_a_send_expanded_again_adds_no_delivery_twice(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """A crash between chunks: the deliveries of a chunk committed, its progress lost
    (here: set back), and the whole send expanded again, chunk by chunk."""
    t = await make_tenant()
    users = [f"u{i}" for i in range(5)]
    for user in users:
        await _address(hub, t, user, f"{user}@shop.test")
    nid = await _publish(hub, t, users, channels=["email"])
    await _run(hub)
    assert len(await _deliveries(sessionmaker, nid)) == 5

    async with UnitOfWork(sessionmaker) as unit:
        await unit.session.execute(
            update(ChannelSend).where(ChannelSend.id == nid).values(expanded=0, done_at=None)
        )
    worker = ChannelWorker(units(sessionmaker), ChannelExpander(2, ChannelRows()))
    assert await worker.run_once() == 0
    async with sessionmaker() as session:
        send = await session.get(ChannelSend, nid)
        assert send is not None and send.expanded == 5 and send.done_at is not None
    assert len(await _deliveries(sessionmaker, nid)) == 5


async def test_a_rule_with_channels_emails_its_recipients(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _address(hub, t, "ann", "ann@shop.test")
    rule = {
        "target_type": "post",
        "recipients": [{"relationship": "follower", "title": "New comment"}],
        "channels": ["inbox", "email"],
    }
    put = await hub.client.put(
        "/v1/admin/rules/commented", json=rule, params={"tenant": t.name}, headers=t.admin
    )
    assert put.status_code == 201, put.text
    assert put.json()["channels"] == ["inbox", "email"]
    got = await hub.client.get(
        "/v1/admin/rules/commented", params={"tenant": t.name}, headers=t.admin
    )
    assert got.json()["channels"] == ["inbox", "email"]
    response = await _fire(hub, t, "commented", {})
    assert response.status_code == 202, response.text
    await _run(hub)
    async with sessionmaker() as session:
        rows = await session.scalars(select(Delivery).where(Delivery.tenant == t.name))
        found = [(d.definition, d.payload["to"], d.payload["notification"]["title"]) for d in rows]
    assert found == [("email", "ann@shop.test", "New comment")]


async def test_rule_text_rendering_what_a_publish_may_not_send_is_made_printable(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """An event's data (and a template's escapes) may render control characters, NUL or a
    lone surrogate, which a publish is refused for: they become spaces (line breaks too,
    in the title) and U+FFFD. Before, the surrogate answered 500 (the copy's JSON), the
    NUL 500 once e-mailed (PostgreSQL), and the rest was stored as it came."""
    t = await make_tenant()
    await _address(hub, t, "ann", "ann@shop.test")
    title = "{{ '\\ud800' }} {{ data.t }}{{ '\\x00' }}"
    rule = {
        "target_type": "post",
        "recipients": [{"relationship": "follower", "title": title, "body": "{{ data.b }}"}],
        "channels": ["inbox", "email"],
    }
    put = await hub.client.put(
        "/v1/admin/rules/texty", json=rule, params={"tenant": t.name}, headers=t.admin
    )
    assert put.status_code == 201, put.text
    event = {
        "actor": {"id": "bob"},
        "target": {"type": "post", "id": "p1"},
        "data": {"t": "line1\nline2\u0085bell\u0007", "b": "one\ntwo\u0001\tend"},
    }
    preview = await hub.client.post(
        "/v1/admin/rules/preview",
        json={"rule": rule, "name": "texty", **event},
        headers=t.admin,
    )
    assert preview.status_code == 200, preview.text
    response = await _fire(hub, t, "texty", event["data"])
    assert response.status_code == 202, response.text
    assert response.json()["errors"] == []
    expected = ("\ufffd line1 line2 bell", "one\ntwo \tend")
    [shown] = preview.json()["recipients"]
    assert (shown["title"], shown["body"]) == expected
    await _run(hub)
    async with sessionmaker() as session:
        rows = await session.scalars(select(Delivery).where(Delivery.tenant == t.name))
        emailed = [(n["title"], n["body"]) for n in (d.payload["notification"] for d in rows)]
    assert emailed == [expected]


async def test_empty_preference_defaults_create_nothing(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]]
) -> None:
    """No categories on a tenant with none creates nothing: 200, not 201."""
    t = await make_tenant()
    url, params = "/v1/admin/preference-defaults", {"tenant": t.name}
    empty = await hub.client.put(url, json={"categories": {}}, params=params, headers=t.admin)
    assert empty.status_code == 200, empty.text
    defaults = {"categories": {"digest": {"inbox": True, "push": False, "email": False}}}
    created = await hub.client.put(url, json=defaults, params=params, headers=t.admin)
    assert created.status_code == 201, created.text


async def test_tenant_defaults_decide_for_users_without_a_row_and_critical_bypasses(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    for user in ("ann", "bob"):
        await _address(hub, t, user, f"{user}@shop.test")
    defaults = {"categories": {"digest": {"inbox": True, "push": False, "email": False}}}
    put = await hub.client.put(
        "/v1/admin/preference-defaults", json=defaults, params={"tenant": t.name}, headers=t.admin
    )
    assert put.status_code == 201, put.text  # the tenant had none
    again = await hub.client.put(
        "/v1/admin/preference-defaults", json=defaults, params={"tenant": t.name}, headers=t.admin
    )
    assert again.status_code == 200, again.text
    got = await hub.client.get(
        "/v1/admin/preference-defaults", params={"tenant": t.name}, headers=t.admin
    )
    assert got.json() == {"tenant": t.name, **defaults}
    await _prefs(hub, t, "bob", {"digest": {"inbox": True, "push": True, "email": True}})

    nid = await _publish(hub, t, ["ann", "bob"], category="digest", channels=["email"])
    await _run(hub)
    assert [d.payload["user"] for d in await _deliveries(sessionmaker, nid)] == ["bob"]
    assert (await _trace(hub, t, nid))["ann"] == {"email": "skipped: preference"}

    await _prefs(hub, t, "bob", {"digest": {"inbox": True, "push": True, "email": False}})
    critical = await _publish(
        hub, t, ["ann", "bob", "cy"], category="digest", severity="critical", channels=["email"]
    )
    await _run(hub)
    sent = sorted(d.payload["user"] for d in await _deliveries(sessionmaker, critical))
    assert sent == ["ann", "bob"]  # opt-outs bypassed
    assert (await _trace(hub, t, critical))["cy"] == {"email": "skipped: no address"}


async def test_preferences_show_the_matrix(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]], admin_key: str
) -> None:
    t = await make_tenant()
    await _prefs(hub, t, "ann", {"dock": {"email": False}})
    token = hub.tokens.mint_user_token("ann", t.name, 3600)
    mine = await hub.client.get("/v1/me/preferences", headers=_auth(token))
    assert mine.json()["categories"] == {"dock": {"inbox": True, "push": True, "email": False}}
    seen = await hub.client.get(f"/v1/admin/users/{t.name}/ann", headers=t.admin)
    assert seen.json()["preferences"]["categories"]["dock"]["email"] is False


async def test_one_tenants_send_never_uses_anothers_definitions_addresses_or_subscriptions(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
    push: PushService,
) -> None:
    a, b = await make_tenant(), await make_tenant()
    await _address(hub, b, "ann", "ann-of-b@shop.test")
    await _subscribe(hub, b, "ann", 1, push)
    b_email = {"kind": "email", "email": {"subject": "B", "text": "B", "to": ["b@x.test"]}}
    response = await hub.client.put(
        "/v1/admin/delivery-definitions/email",
        json=b_email,
        params={"tenant": b.name},
        headers=b.admin,
    )
    assert response.status_code in (200, 201), response.text

    nid = await _publish(hub, a, ["ann"], channels=["email", "push"])
    await _run(hub)
    assert await _deliveries(sessionmaker, nid) == []
    assert (await _trace(hub, a, nid))["ann"] == {
        "email": "skipped: no address",
        "push": "skipped: no subscription",
    }
    async with sessionmaker() as session:
        mine = await session.scalars(select(Delivery).where(Delivery.tenant == b.name))
        assert list(mine) == []

    theirs = await _publish(hub, b, ["ann"], channels=["email"])
    await _run(hub)
    assert [d.tenant for d in await _deliveries(sessionmaker, theirs)] == [b.name]
    listed = await hub.client.get(
        "/v1/admin/deliveries", params={"tenant": a.name, "notification": theirs}, headers=a.admin
    )
    assert listed.status_code == 200 and listed.json()["deliveries"] == []

    # Tenant-bound admin keys: A's key neither reads nor replaces B's defaults.
    for method in ("GET", "PUT"):
        response = await hub.client.request(
            method,
            "/v1/admin/preference-defaults",
            params={"tenant": b.name},
            json={"categories": {}} if method == "PUT" else None,
            headers=a.admin,
        )
        assert response.status_code == 403, response.text
        assert response.headers["content-type"] == "application/problem+json"


async def test_channels_are_validated_at_the_edge(
    hub: Any, make_tenant: Callable[[], Awaitable[Tenant]]
) -> None:
    t = await make_tenant()
    for channels in (["sms"], ["email", "email"], "email", [1]):
        body = {"tenant": t.name, "recipients": {"users": ["ann"]}, "title": "x"}
        response = await hub.client.post(
            "/v1/notifications", json={**body, "channels": channels}, headers=t.publish
        )
        assert response.status_code == 422, (channels, response.text)
        assert response.headers["content-type"] == "application/problem+json"


class _NoDatabase:
    """A sessionmaker that fails the test if a session is ever asked for."""

    calls = 0

    def __call__(self) -> AsyncSession:
        self.calls += 1
        raise AssertionError("PostgreSQL was used")


async def test_a_publish_without_channels_needs_no_postgresql(hub: Any) -> None:
    ingest = hub.app_state["ingest"]
    principal = ServicePrincipal("k", "k", Scope.PUBLISH, None)
    nobody = _NoDatabase()

    async def publish(draft: Draft) -> None:
        async with UnitOfWork(nobody) as unit:  # type: ignore[arg-type]
            await ingest.publish(unit, principal, draft, Recipients(users=("ann",)))

    await publish(Draft(title="inbox only"))
    assert nobody.calls == 0
    with pytest.raises(AssertionError, match="PostgreSQL was used"):
        await publish(Draft(title="mailed", channels=("email",)))


async def test_a_scheduled_notification_keeps_its_channels(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _address(hub, t, "ann", "ann@shop.test")
    nid = await _publish(hub, t, ["ann"], channels=["email"], delay=1)
    shown = await hub.client.get(f"/v1/delayed/{nid}", params={"tenant": t.name}, headers=t.publish)
    assert shown.json()["body"]["draft"]["channels"] == ["email"]
    async with asyncio.timeout(20):  # published at its time (the hub's own loops)
        while await _send_of(sessionmaker, nid) is None:
            await asyncio.sleep(0.1)
    await _run(hub)
    assert [d.payload["to"] for d in await _deliveries(sessionmaker, nid)] == ["ann@shop.test"]


async def _send_of(sessionmaker: async_sessionmaker[AsyncSession], nid: str) -> ChannelSend | None:
    async with sessionmaker() as session:
        return await session.get(ChannelSend, nid)


async def test_a_definition_of_another_kind_skips_the_channel(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """The tenant's own `email` is a webhook: no e-mail is sent through it (nor POSTed)."""
    t = await make_tenant()
    await _address(hub, t, "ann", "ann@shop.test")
    webhook = {"kind": "webhook", "url": "http://127.0.0.1:9/hook"}
    response = await hub.client.put(
        "/v1/admin/delivery-definitions/email",
        json=webhook,
        params={"tenant": t.name},
        headers=t.admin,
    )
    assert response.status_code == 201, response.text
    nid = await _publish(hub, t, ["ann"], channels=["email"])
    await _run(hub)
    assert await _deliveries(sessionmaker, nid) == []
    assert (await _trace(hub, t, nid))["ann"] == {"email": "skipped: no e-mail definition"}


async def test_a_send_that_keeps_failing_waits_and_holds_up_no_other(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    t = await make_tenant()
    await _address(hub, t, "ann", "ann@shop.test")
    bad = await _publish(hub, t, ["ann"], channels=["push"])
    async with UnitOfWork(sessionmaker) as unit:  # a notification no push can be made of
        broken = {"severity": "unheard-of"}
        await unit.session.execute(
            update(ChannelSend)
            .where(ChannelSend.id == bad)
            .values(notification=ChannelSend.notification.op("||")(broken))
        )
    good = await _publish(hub, t, ["ann"], channels=["email"])
    try:
        await _run(hub)
        assert [d.payload["to"] for d in await _deliveries(sessionmaker, good)] == ["ann@shop.test"]
        async with sessionmaker() as session:
            send = await session.get(ChannelSend, bad)
            assert send is not None and send.done_at is None and send.expanded == 0
            assert send.failures == 1 and send.retry_at is not None
            assert "unheard-of" in (send.last_error or "")
        assert await _run(hub) == 0  # not due again yet
    finally:
        async with UnitOfWork(sessionmaker) as unit:
            await unit.session.execute(delete(ChannelSend).where(ChannelSend.id == bad))
