"""Web Push deliveries end to end: a real hub, a local push service on loopback that
checks the VAPID token and decrypts what it gets, as a browser's push service would."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from notifyhub.db.repositories import push_subscriptions
from notifyhub.db.unit import UnitOfWork, units
from notifyhub.services.outbound import AddressGuard, Outbound
from notifyhub.services.vapid import VapidKeys, VapidPair, public_point
from notifyhub.services.webpush_target import (
    LOOKUPS,
    MAX_PLAINTEXT,
    TOKEN_REUSE_S,
    VapidTokens,
    WebPushTarget,
    enqueue_webpush,
    vapid_authorization,
    webpush_payload,
)
from notifyhub.settings import DeliverySettings, Settings, WebPushSettings
from support.deliveries import define, get, post, unique, wait_status
from support.pushservice import PushService, VapidRefused, verify_vapid
from support.webpush import Browser

CreateKey = Callable[..., Awaitable[str]]


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    deliveries = DeliverySettings(
        allow_networks=["127.0.0.1/32"],
        dispatcher_interval_s=0.05,
        jitter=0.0,
        lease_s=5,
        max_timeout_s=4,
    )
    return settings.model_copy(update={"deliveries": deliveries})


class Setup:
    """A tenant with keys, a `webpush` definition, and a way to subscribe its users."""

    def __init__(self, hub: Any, push: PushService, tenant: str, keys: dict[str, str]) -> None:
        self.hub, self.push, self.tenant, self.keys = hub, push, tenant, keys
        self.definition = unique("wp")

    async def subscribe(self, user: str) -> tuple[str, str, Browser]:
        """A browser of `user` subscribed at the push service, registered with the hub:
        (push service id, hub subscription id, browser)."""
        me = _auth(self.hub.tokens.mint_user_token(user, self.tenant))
        key = (await self.hub.client.get("/v1/me/push-key", headers=me)).json()["public_key"]
        browser = Browser()
        sid, endpoint = self.push.subscribe(browser, key)
        answer = await self.hub.client.post(
            "/v1/me/push-subscriptions", json=browser.subscription(endpoint), headers=me
        )
        assert answer.status_code == 201, answer.text
        return sid, answer.json()["id"], browser

    async def deliver(self, subscription_id: str, notification: Any, **extra: Any) -> str:
        payload = {"subscription_id": subscription_id, "notification": notification, **extra}
        return await post(
            self.hub.client, self.keys["publish"], self.definition, payload, self.tenant
        )

    async def wait(self, delivery_id: str, status: str) -> Any:
        return await wait_status(
            self.hub.client, self.keys["admin"], delivery_id, status, tenant=self.tenant
        )

    async def subscriptions(self, user: str) -> list[str]:
        async with self.hub.app_state["sessionmaker"]() as session:
            found = await push_subscriptions.of_user(session, self.tenant, user)
        return [s.id for s in found]


@pytest.fixture
async def setup(hub: Any, push: PushService, create_key: CreateKey) -> Setup:
    tenant = f"wpd-{secrets.token_hex(3)}"
    keys = {scope: await create_key(f"wp-{scope}", scope, tenant) for scope in ("admin", "publish")}
    made = Setup(hub, push, tenant, keys)
    await define(
        hub.client,
        keys["admin"],
        f"{made.definition}?tenant={tenant}",
        kind="webpush",
        retry_intervals="100ms",
        max_retries=3,
        timeout_s=3.0,
    )
    return made


async def test_delivered_encrypted_signed_and_decrypted(setup: Setup) -> None:
    sid, subscription, _ = await setup.subscribe("alice")
    note = {"title": "Restock aisle 4", "body": "SKU 1042 is low", "data": {"url": "/r/1042"}}
    did = await setup.deliver(subscription, note, ttl_s=600, urgency="high", topic="restock-4")
    await setup.wait(did, "sent")
    [got] = await setup.push.wait_for(sid, 1)
    assert got.refusal is None and got.status == 201
    assert got.message == note
    assert got.body != got.plaintext  # encrypted on the wire
    assert (got.headers["ttl"], got.headers["urgency"], got.headers["topic"]) == (
        "600",
        "high",
        "restock-4",
    )
    assert got.headers["content-encoding"] == "aes128gcm"
    assert got.headers["content-type"] == "application/octet-stream"
    claims = verify_vapid(got.headers["authorization"], setup.push.origin, None)
    assert claims["sub"] == "mailto:admin@localhost"


async def test_defaults_ttl_a_day_urgency_normal_no_topic(setup: Setup) -> None:
    sid, subscription, _ = await setup.subscribe("alice")
    did = await setup.deliver(subscription, {"title": "hi"})
    await setup.wait(did, "sent")
    [got] = await setup.push.wait_for(sid, 1)
    assert (got.headers["ttl"], got.headers["urgency"]) == ("86400", "normal")
    assert "topic" not in got.headers


async def test_pushes_to_one_push_service_share_a_token_and_each_decrypts(setup: Setup) -> None:
    """The bench's shape (browsers in turn, a topic per push): one signed token serves
    every push to the push service, and each push still decrypts for its own browser."""
    browsers = [await setup.subscribe(f"user{n}") for n in range(2)]
    for n in range(4):
        _, subscription, _ = browsers[n % 2]
        did = await setup.deliver(subscription, {"i": n, "pad": "x" * 200}, topic=f"w{n}")
        await setup.wait(did, "sent")
    got = [p for sid, _, _ in browsers for p in await setup.push.wait_for(sid, 2)]
    assert sorted(p.message["i"] for p in got) == [0, 1, 2, 3]
    assert all(p.status == 201 and p.headers["topic"] == f"w{p.message['i']}" for p in got)
    assert len({p.headers["authorization"] for p in got}) == 1


class CountingUnits:
    """Units of work that count how many are open at once (`most`)."""

    def __init__(self, hub: Any) -> None:
        self._units = units(hub.app_state["sessionmaker"])
        self.open = self.most = 0

    @contextlib.asynccontextmanager
    async def _counted(self, autocommit: bool) -> AsyncIterator[UnitOfWork]:
        async with self._units(autocommit=autocommit) as unit:
            self.open += 1
            self.most = max(self.most, self.open)
            try:
                yield unit
            finally:
                self.open -= 1

    def __call__(self, *, autocommit: bool = False) -> Any:
        return self._counted(autocommit)


async def test_a_burst_of_sends_reads_subscriptions_a_few_at_a_time(setup: Setup) -> None:
    """Sends in flight (64) each holding a connection for its subscription's read took
    every connection of the outbox's pool (4, 8 under load) and starved its claims."""
    sid, subscription, _ = await setup.subscribe("alice")
    counted = CountingUnits(setup.hub)
    guard = AddressGuard(allow=["127.0.0.1/32"])
    vapid = VapidKeys(WebPushSettings(), units(setup.hub.app_state["sessionmaker"]))
    outbound = Outbound(guard, 4096, 64)
    target = WebPushTarget(counted, outbound, vapid)
    payloads = [webpush_payload(subscription, {"i": n}) for n in range(20)]
    try:
        outcomes = await asyncio.gather(*(target.send(setup.tenant, p, 5.0) for p in payloads))
    finally:
        await outbound.aclose()
    assert [o.status_code for o in outcomes] == [201] * 20
    assert counted.most == LOOKUPS
    assert sorted(p.message["i"] for p in await setup.push.wait_for(sid, 20)) == list(range(20))


def test_vapid_tokens_are_kept_per_push_service_for_half_their_lifetime() -> None:
    now = [1_800_000_000.0]
    tokens, pair, other = VapidTokens(lambda: now[0]), _pair(), _pair()
    first = tokens.authorization(pair, "https://push.example.net/push/a")
    assert tokens.authorization(pair, "https://push.example.net/push/b") == first
    assert tokens.authorization(pair, "https://other.example.net/push/a") != first
    assert tokens.authorization(other, "https://push.example.net/push/a") != first
    now[0] += TOKEN_REUSE_S - 1
    assert tokens.authorization(pair, "https://push.example.net/push/c") == first
    now[0] += 1
    renewed = tokens.authorization(pair, "https://push.example.net/push/c")
    assert renewed != first
    claims = verify_vapid(renewed, "https://push.example.net", pair.public_key, now=now[0])
    assert claims["exp"] == int(now[0]) + 12 * 3600


@pytest.mark.parametrize("status", [410, 404])
async def test_gone_removes_the_subscription_and_ends_the_delivery(
    setup: Setup, status: int
) -> None:
    sid, subscription, _ = await setup.subscribe("alice")
    _, other, _ = await setup.subscribe("alice")
    setup.push.plan(sid, status)
    did = await setup.deliver(subscription, {"title": "hi"})
    found = await setup.wait(did, "final_failed")
    assert found["attempts"][-1]["error"] == f"subscription gone ({status})"
    assert found["attempts"][-1]["status_code"] == status
    assert await setup.subscriptions("alice") == [other]
    # the definition stays enabled: another browser still gets its pushes
    await setup.wait(await setup.deliver(other, {"title": "still on"}), "sent")


async def test_429_retries_then_succeeds(setup: Setup) -> None:
    sid, subscription, _ = await setup.subscribe("alice")
    setup.push.plan(sid, 429, 503)
    did = await setup.deliver(subscription, {"title": "again"})
    found = await setup.wait(did, "sent")
    assert [a["status_code"] for a in found["attempts"]] == [429, 503, 201]
    got = await setup.push.wait_for(sid, 3)
    assert [p.message for p in got] == [{"title": "again"}] * 3


async def test_another_4xx_ends_it_with_the_reply(setup: Setup) -> None:
    sid, subscription, _ = await setup.subscribe("alice")
    setup.push.plan(sid, 413)
    did = await setup.deliver(subscription, {"title": "too much"})
    found = await setup.wait(did, "final_failed")
    assert found["attempts"][-1]["status_code"] == 413
    assert found["attempts"][-1]["error"].startswith("HTTP 413")
    assert len(found["attempts"]) == 1
    assert await setup.subscriptions("alice") == [subscription]  # kept


async def test_a_refusing_push_service_reply_is_kept(setup: Setup) -> None:
    """The push service refuses a token signed with another key (401, its reason kept)."""
    _, subscription, browser = await setup.subscribe("alice")
    sid, endpoint = setup.push.subscribe(browser, "B" + "A" * 86)  # made with another key
    async with setup.hub.app_state["sessionmaker"]() as session, session.begin():
        await push_subscriptions.remove(session, setup.tenant, "alice", subscription)
    me = _auth(setup.hub.tokens.mint_user_token("alice", setup.tenant))
    answer = await setup.hub.client.post(
        "/v1/me/push-subscriptions", json=browser.subscription(endpoint), headers=me
    )
    did = await setup.deliver(answer.json()["id"], {"title": "x"})
    found = await setup.wait(did, "final_failed")
    assert found["attempts"][-1]["status_code"] == 401
    assert "not the key the subscription was made with" in found["attempts"][-1]["error"]
    assert setup.push.of(sid)[0].refusal is not None


async def test_a_removed_subscription_or_a_bad_payload_ends_the_delivery(setup: Setup) -> None:
    _, subscription, _ = await setup.subscribe("alice")
    me = _auth(setup.hub.tokens.mint_user_token("alice", setup.tenant))
    url = f"/v1/me/push-subscriptions/{subscription}"
    assert (await setup.hub.client.delete(url, headers=me)).status_code == 204
    did = await setup.deliver(subscription, {"title": "late"})
    found = await setup.wait(did, "final_failed")
    assert found["attempts"][-1]["error"].startswith("subscription gone")
    for bad in ({"notification": {}}, {"subscription_id": subscription, "urgency": "now"}):
        did = await post(
            setup.hub.client, setup.keys["publish"], setup.definition, bad, setup.tenant
        )
        found = await setup.wait(did, "final_failed")
        assert len(found["attempts"]) == 1


async def test_another_tenants_subscription_is_never_reached(
    setup: Setup, create_key: CreateKey
) -> None:
    """A delivery names a subscription by id; only its own tenant's ids mean anything."""
    sid, subscription, _ = await setup.subscribe("alice")
    other = f"wpo-{secrets.token_hex(3)}"
    admin, publish = await create_key("o", "admin", other), await create_key("o", "publish", other)
    name = unique("wp")
    await define(setup.hub.client, admin, f"{name}?tenant={other}", kind="webpush")
    payload = {"subscription_id": subscription, "notification": {"title": "forged"}}
    did = await post(setup.hub.client, publish, name, payload, other)
    found = await wait_status(setup.hub.client, admin, did, "final_failed", tenant=other)
    assert found["attempts"][-1]["error"].startswith("subscription gone")
    assert setup.push.of(sid) == []


async def test_enqueue_webpush_inside_a_unit_sends_after_commit_only(setup: Setup) -> None:
    sid, subscription_id, _ = await setup.subscribe("alice")
    state = setup.hub.app_state
    async with state["sessionmaker"]() as session:
        subscription = await push_subscriptions.get(session, setup.tenant, subscription_id)
    assert subscription is not None
    sender = state["deliveries"].sender

    async def rolled_back() -> None:
        async with UnitOfWork(state["sessionmaker"]) as unit:
            await enqueue_webpush(unit, setup.definition, subscription, {"t": 0}, sender=sender)
            raise RuntimeError("the caller's transaction fails")

    with pytest.raises(RuntimeError, match="fails"):
        await rolled_back()
    async with UnitOfWork(state["sessionmaker"]) as unit:
        did = await enqueue_webpush(
            unit, setup.definition, subscription, {"t": 1}, topic="t1", sender=sender
        )
    await setup.wait(did, "sent")
    got = await setup.push.wait_for(sid, 1)
    assert [p.message for p in got] == [{"t": 1}]
    found = await get(setup.hub.client, setup.keys["admin"], did, setup.tenant)
    assert found["payload"]["subscription_id"] == subscription_id


async def test_a_webpush_definition_takes_no_target(setup: Setup) -> None:
    answer = await setup.hub.client.put(
        f"/v1/admin/delivery-definitions/{unique('wp')}?tenant={setup.tenant}",
        json={"kind": "webpush", "url": "https://example.com/"},
        headers=_auth(setup.keys["admin"]),
    )
    assert answer.status_code == 422 and "webpush" in answer.text


def test_payload_bounds() -> None:
    assert webpush_payload("s", {"a": 1})["urgency"] == "normal"
    for bad, says in (
        ({"ttl_s": -1}, "ttl_s"),
        ({"urgency": "urgent"}, "urgency"),
        ({"topic": "x" * 33}, "topic"),
        ({"topic": "no spaces"}, "topic"),
        ({"topic": "restock\n"}, "topic"),
    ):
        with pytest.raises(ValueError, match=says):
            webpush_payload("s", {"a": 1}, **bad)
    with pytest.raises(ValueError, match="at most"):
        webpush_payload("s", {"a": "x" * MAX_PLAINTEXT})


def _pair() -> VapidPair:
    key = ec.generate_private_key(ec.SECP256R1())
    return VapidPair(key, public_point(key), "mailto:ops@example.com")


def test_the_verifier_accepts_the_hubs_tokens_and_refuses_forged_ones() -> None:
    pair, endpoint = _pair(), "https://push.example.net/push/abc"
    good = vapid_authorization(pair, endpoint)
    claims = verify_vapid(good, "https://push.example.net", pair.public_key)
    assert claims["aud"] == "https://push.example.net"
    assert 0 < claims["exp"] - time.time() <= 24 * 3600
    # signed by another key, presented with the hub's public key
    other = _pair()
    forged = vapid_authorization(other, endpoint).replace(other.public_key, pair.public_key)
    refusals = {
        "bad signature": (forged, "https://push.example.net"),
        "wrong audience": (good, "https://other.example.net"),
        "no vapid": ("Bearer x", "https://push.example.net"),
    }
    for why, (authorization, audience) in refusals.items():
        with pytest.raises(VapidRefused):  # noqa: PT012 (`why` names the case that passed)
            verify_vapid(authorization, audience, None)
            pytest.fail(why)
    token = good.split("t=")[1].split(",")[0]
    tampered = good.replace(token, token[:-4] + ("AAAA" if token[-4:] != "AAAA" else "BBBB"))
    with pytest.raises(VapidRefused):
        verify_vapid(tampered, "https://push.example.net", None)
    late = jwt.encode(
        {
            "aud": "https://push.example.net",
            "exp": int(time.time()) + 25 * 3600,
            "sub": "mailto:a@b",
        },
        pair.private_key,
        algorithm="ES256",
    )
    with pytest.raises(VapidRefused, match="24 hours"):
        verify_vapid(f"vapid t={late}, k={pair.public_key}", "https://push.example.net", None)
    anonymous = jwt.encode(
        {"aud": "https://push.example.net", "exp": int(time.time()) + 60},
        pair.private_key,
        algorithm="ES256",
    )
    with pytest.raises(VapidRefused):
        verify_vapid(f"vapid t={anonymous}, k={pair.public_key}", "https://push.example.net", None)
