"""Users' Web Push subscriptions (`/v1/me/push-subscriptions`) and the hub's VAPID key
(`/v1/me/push-key`): registered from the browser's `toJSON()`, idempotent by endpoint,
at most 10 per user, listed and removed by their owner only; the key is one per
installation (every hub process and restart), or the configured one."""

from __future__ import annotations

import asyncio
import base64
import secrets
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy import delete, select

from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.models import VapidKey
from notifyhub.db.repositories import push_subscriptions
from notifyhub.db.unit import units
from notifyhub.services.vapid import VapidKeys, public_point
from notifyhub.settings import Settings, WebPushSettings
from support.deliveries import reaching_localhost
from support.webpush import Browser, b64url

URL = "/v1/me/push-subscriptions"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _endpoint() -> str:
    return f"https://push.example.test/send/{secrets.token_urlsafe(12)}"


@pytest.fixture
def me(make_token: Callable[..., str]) -> Callable[[str, str], dict[str, str]]:
    return lambda user, tenant: _auth(make_token(user, tenant))


@pytest.fixture
def tenant() -> str:
    return f"wp-{secrets.token_hex(3)}"


async def test_push_key_is_an_uncompressed_p256_point_the_same_for_everyone(
    hub: Any, me: Any, tenant: str
) -> None:
    first = await hub.client.get("/v1/me/push-key", headers=me("alice", tenant))
    assert first.status_code == 200, first.text
    assert set(first.json()) == {"public_key"}
    raw = base64.urlsafe_b64decode(first.json()["public_key"] + "=")
    assert len(raw) == 65 and raw[0] == 4
    ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    other = await hub.client.get("/v1/me/push-key", headers=me("bob", "elsewhere"))
    assert other.json() == first.json()
    assert "PRIVATE" not in first.text
    assert (await hub.client.get("/v1/me/push-key")).status_code == 401


async def test_subscribe_list_resubscribe_and_remove(hub: Any, me: Any, tenant: str) -> None:
    alice = {**me("alice", tenant), "User-Agent": "TestBrowser/1.0"}
    browser, endpoint = Browser(), _endpoint()
    added = await hub.client.post(URL, json=browser.subscription(endpoint), headers=alice)
    assert added.status_code == 201, added.text
    first = added.json()
    assert first["endpoint"] == endpoint and first["user_agent"] == "TestBrowser/1.0"
    assert first["expiration_time"] is None and len(first["id"]) == 26

    # the browser's keys rotated: the same endpoint updates the same subscription
    rotated, later = Browser(), 1_900_000_000_000
    again = await hub.client.post(URL, json=rotated.subscription(endpoint, later), headers=alice)
    assert again.status_code == 201, again.text
    assert again.json()["id"] == first["id"]
    assert again.json()["created_at"] == first["created_at"]
    assert again.json()["expiration_time"].startswith("2030-03-17")
    listed = (await hub.client.get(URL, headers=alice)).json()["subscriptions"]
    assert [s["id"] for s in listed] == [first["id"]]
    async with hub.app_state["sessionmaker"]() as session:
        stored = await push_subscriptions.of_users(session, tenant, ["alice", "bob"])
    assert list(stored) == ["alice"]
    assert stored["alice"][0].p256dh == b64url(rotated.public_raw)
    assert stored["alice"][0].auth == b64url(rotated.auth)

    gone = await hub.client.delete(f"{URL}/{first['id']}", headers=alice)
    assert gone.status_code == 204, gone.text
    assert (await hub.client.get(URL, headers=alice)).json() == {"subscriptions": []}
    missing = await hub.client.delete(f"{URL}/{first['id']}", headers=alice)
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"


async def test_ten_per_user_the_eleventh_is_a_409_naming_the_limit(
    hub: Any, me: Any, tenant: str
) -> None:
    alice = me("alice", tenant)
    endpoints = [_endpoint() for _ in range(10)]
    for endpoint in endpoints:
        answer = await hub.client.post(URL, json=Browser().subscription(endpoint), headers=alice)
        assert answer.status_code == 201, answer.text
    refused = await hub.client.post(URL, json=Browser().subscription(_endpoint()), headers=alice)
    assert refused.status_code == 409, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["limit"] == 10 and "10" in refused.json()["detail"]
    # re-registering one she holds is no new one
    again = await hub.client.post(URL, json=Browser().subscription(endpoints[3]), headers=alice)
    assert again.status_code == 201, again.text
    assert len((await hub.client.get(URL, headers=alice)).json()["subscriptions"]) == 10
    # another user's limit is their own
    bob = me("bob", tenant)
    answer = await hub.client.post(URL, json=Browser().subscription(_endpoint()), headers=bob)
    assert answer.status_code == 201


async def test_concurrent_adds_never_pass_the_limit(hub: Any, me: Any, tenant: str) -> None:
    alice = me("alice", tenant)
    bodies = [Browser().subscription(_endpoint()) for _ in range(14)]
    answers = await asyncio.gather(*(hub.client.post(URL, json=b, headers=alice) for b in bodies))
    assert sorted(a.status_code for a in answers) == [201] * 10 + [409] * 4
    assert len((await hub.client.get(URL, headers=alice)).json()["subscriptions"]) == 10


def _with(body: dict[str, Any], **keys: Any) -> dict[str, Any]:
    return {**body, "keys": {**body["keys"], **keys}}


BROWSER = Browser()
GOOD = BROWSER.subscription("https://push.example.test/send/abc")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (_with(GOOD, p256dh=b64url(BROWSER.public_raw[:33])), "p256dh"),
        (_with(GOOD, p256dh=b64url(b"\x04" + b"\x01" * 64)), "p256dh"),  # not on the curve
        (_with(GOOD, p256dh="!" * 87), "p256dh"),
        (_with(GOOD, auth=b64url(b"\x00" * 15)), "auth"),
        (_with(GOOD, auth=b64url(b"\x00" * 32)), "auth"),
        ({**GOOD, "keys": {"p256dh": GOOD["keys"]["p256dh"]}}, "auth"),
        ({**GOOD, "endpoint": "ftp://push.example.test/x"}, "endpoint"),
        ({**GOOD, "endpoint": "http://push.example.test/x"}, "https"),
        ({**GOOD, "endpoint": "http://8.8.8.8/x"}, "https"),
        ({**GOOD, "endpoint": "https://127.0.0.1/x"}, "SSRF"),
        ({**GOOD, "endpoint": "https://169.254.169.254/x"}, "SSRF"),
        ({**GOOD, "endpoint": "https://push.example.test/\nx"}, "endpoint"),
        ({**GOOD, "endpoint": "https://push.example.test/" + "é" * 2000}, "endpoint"),
        ({**GOOD, "endpoint": "https://push.example.test:xx/x"}, "Port"),  # was a 500
        ({**GOOD, "endpoint": "https://push.example.test:99999/x"}, "Port"),
        ({**GOOD, "endpoint": "https://user:pw@push.example.test/x"}, "user or password"),
        ({**GOOD, "endpoint": "https://user@push.example.test/x"}, "user or password"),
        ({**GOOD, "expirationTime": "soon"}, "expirationTime"),
        ({**GOOD, "expirationTime": -1}, "expirationTime"),
        ({**GOOD, "user": "bob"}, "user"),
    ],
)
async def test_bad_subscriptions_are_422_and_store_nothing(
    hub: Any, me: Any, tenant: str, body: dict[str, Any], says: str
) -> None:
    alice = me("alice", tenant)
    answer = await hub.client.post(URL, json=body, headers=alice)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert says in answer.text
    assert (await hub.client.get(URL, headers=alice)).json() == {"subscriptions": []}


@pytest.fixture
def local_settings(settings: Settings) -> Settings:
    return reaching_localhost(settings)


async def test_http_to_an_allowed_local_address_is_accepted(
    start_hub: Any, local_settings: Settings, me: Any, tenant: str
) -> None:
    async with start_hub(local_settings) as hub:
        body = Browser().subscription("http://127.0.0.1:9/push/abc")
        answer = await hub.client.post(URL, json=body, headers=me("alice", tenant))
        assert answer.status_code == 201, answer.text
        other = Browser().subscription("http://10.1.2.3/push/abc")  # not allowed there
        refused = await hub.client.post(URL, json=other, headers=me("alice", tenant))
        assert refused.status_code == 422, refused.text


async def test_one_vapid_pair_per_installation_even_when_hubs_race(settings: Settings) -> None:
    """Hubs starting at once (a fresh installation's pods): each offers a pair, one is
    stored, every one of them uses it."""
    engine = create_engine(settings.database_url or "")
    make = units(create_sessionmaker(engine))
    async with make() as unit:  # the run's pair, put back afterwards
        saved = (await unit.session.execute(select(VapidKey))).scalars().all()
        unit.session.expunge_all()
        await unit.session.execute(delete(VapidKey))  # now a fresh installation
    try:
        hubs = [VapidKeys(WebPushSettings(), make) for _ in range(6)]
        keys = await asyncio.gather(*(h.public_key() for h in hubs))
        assert len(set(keys)) == 1
        later = await VapidKeys(WebPushSettings(), make).public_key()  # a restart
        assert later == keys[0]
    finally:
        async with make() as unit:
            await unit.session.execute(delete(VapidKey))
            unit.session.add_all(saved)
        await engine.dispose()


async def test_a_configured_private_key_wins(start_hub: Any, settings: Settings, me: Any) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    scalar = b64url(key.private_numbers().private_value.to_bytes(32, "big"))
    configured = settings.model_copy(
        update={"webpush": WebPushSettings(vapid_private_key=scalar, subject="https://ops.test")}
    )
    async with start_hub(configured) as hub:
        answer = await hub.client.get("/v1/me/push-key", headers=me("alice", "default"))
        assert answer.json() == {"public_key": public_point(key)}


@pytest.mark.parametrize("bad_id", ["%00abc", "a%0d%0ab", "01JD3Q4M6T9W2Z8K5N7R1C0B3X%00"])
async def test_a_subscription_id_that_is_no_id_is_a_422_not_a_500(
    hub: Any, me: Any, tenant: str, bad_id: str
) -> None:
    """A NUL byte reached PostgreSQL (which refuses it in text) as a 500."""
    answer = await hub.client.delete(f"{URL}/{bad_id}", headers=me("alice", tenant))
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert "subscription_id" in answer.text
