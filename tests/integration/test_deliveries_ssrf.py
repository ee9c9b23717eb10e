"""SSRF guard: every RELIABILITY.md vector is refused at PUT and at connect time."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.repositories import deliveries as repo
from notifyhub.services import signing
from notifyhub.services.outbound import AddressGuard, Outbound
from notifyhub.services.targets import ALLOW_NETWORKS_ENV, ALLOW_PRIVATE_ENV
from notifyhub.settings import Settings
from support.deliveries import define, post, reaching_localhost, unique, wait_status
from support.receiver import Receiver, Reply

Maker = async_sessionmaker[AsyncSession]


def _vectors(port: int) -> list[str]:
    return [
        "http://169.254.169.254/latest/meta-data/",
        f"http://localhost:{port}/v",
        f"http://127.1:{port}/v",
        f"http://0:{port}/v",
        f"http://0.0.0.0:{port}/v",
        f"http://[::1]:{port}/v",
        f"http://[::ffff:127.0.0.1]:{port}/v",
        f"http://2130706433:{port}/v",  # decimal
        f"http://0x7f000001:{port}/v",  # hex
        f"http://0177.0.0.1:{port}/v",  # octal (an invalid URL to the API's parser)
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://172.16.0.1/",
        "http://100.64.0.1/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://224.0.0.1/",
    ]


UNPARSABLE = {"http://0177.0.0.1:8080/v"}


async def test_private_and_loopback_targets_are_refused(receiver: Receiver) -> None:
    outbound = Outbound(AddressGuard(allow_private=False), 1024, 4)
    try:
        for url in _vectors(receiver.port):
            outcome = await outbound.post(url, b"{}", {}, timeout_s=2.0)
            assert not outcome.ok, url
            assert outcome.status_code is None, url
            refused = (
                "blocked" in error or "InvalidURL" in error for error in [outcome.error or ""]
            )
            assert any(refused), (url, outcome.error)
    finally:
        await outbound.aclose()
    assert receiver.received == []


async def test_an_allow_list_admits_only_what_it_names(receiver: Receiver) -> None:
    outbound = Outbound(AddressGuard(allow_private=False, allow=["127.0.0.1/32"]), 1024, 4)
    try:
        admitted = await outbound.post(receiver.url("/ok"), b"{}", {}, timeout_s=2.0)
        refused = await outbound.post(f"http://[::1]:{receiver.port}/v", b"{}", {}, 2.0)
    finally:
        await outbound.aclose()
    assert admitted.ok
    assert "blocked" in (refused.error or "")
    assert [r.path for r in receiver.received] == ["/ok"]


async def test_huge_and_hanging_responses_are_bounded(receiver: Receiver) -> None:
    receiver.plan("/huge", Reply(200, body=b"x" * 5_000_000))
    receiver.plan("/hang", Reply(200, delay_s=30))
    outbound = Outbound(AddressGuard(allow_private=True), 64 * 1024, 4)
    try:
        huge = await outbound.post(receiver.url("/huge"), b"{}", {}, timeout_s=10.0)
        hung = await outbound.post(receiver.url("/hang"), b"{}", {}, timeout_s=0.5)
    finally:
        await outbound.aclose()
    assert huge.ok
    assert not hung.ok and "timed out" in (hung.error or "")


def _put(hub: Any, admin_key: str, name: str, body: dict[str, Any]) -> Any:
    return hub.client.put(
        f"/v1/admin/delivery-definitions/{name}",
        json=body,
        headers={"Authorization": f"Bearer {admin_key}"},
    )


async def _stored(hub: Any, admin_key: str, name: str) -> bool:
    response = await hub.client.get(
        f"/v1/admin/delivery-definitions/{name}", headers={"Authorization": f"Bearer {admin_key}"}
    )
    return response.status_code == 200


def _refusals(url: str) -> list[tuple[str, dict[str, Any]]]:
    """The field named and the body: the URL as the definition's, then as its alert's."""
    return [
        ("url", {"url": url}),
        ("alert.webhook_url", {"url": "https://93.184.216.34/", "alert": {"webhook_url": url}}),
    ]


async def test_every_blocked_spelling_is_refused_at_put_naming_the_setting(
    hub: Any, admin_key: str
) -> None:
    for url in _vectors(8080):
        for field, body in _refusals(url):
            name = unique("blocked")
            response = await _put(hub, admin_key, name, body)

            assert response.status_code == 422, (url, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            problem = response.json()
            if url in UNPARSABLE:  # no setting helps: the URL itself is refused
                assert "Invalid IPv4 address" in problem["detail"], response.text
                continue
            assert problem["title"] == "Webhook target blocked", (url, response.text)
            assert problem["detail"].startswith(f"{field}: the SSRF guard blocks {url}: ")
            assert ALLOW_PRIVATE_ENV + "=true" in problem["detail"]
            assert ALLOW_NETWORKS_ENV + "='[" in problem["detail"]
            assert not await _stored(hub, admin_key, name), url


async def test_a_refusal_says_which_address_and_why(hub: Any, admin_key: str) -> None:
    cases = {
        "http://127.1:8080/v": ("127.1 is 127.0.0.1 (a loopback address)", "127.0.0.1/32"),
        "http://[::ffff:169.254.169.254]/": ("link-local", "169.254.169.254/32"),
        "http://0x0a000001/": ("10.0.0.1 (a private address (10.0.0.0/8))", "10.0.0.1/32"),
        "http://localhost:8080/": ("localhost is 127.0.0.1 (a loopback address), ::1", "::1/128"),
    }
    for url, (reason, cidr) in cases.items():
        response = await _put(hub, admin_key, unique("why"), {"url": url})
        assert response.status_code == 422, response.text
        assert reason in response.json()["detail"], response.text
        assert cidr in response.json()["detail"], response.text


async def test_a_name_that_does_not_resolve_is_accepted_with_a_warning(
    hub: Any, admin_key: str
) -> None:
    name = unique("unresolved")
    created = await define(hub.client, admin_key, name, url="http://no-such-host.invalid/hook")
    [warning] = created["warnings"]
    assert warning.startswith("url: no-such-host.invalid does not resolve now")
    assert await _stored(hub, admin_key, name)


async def test_a_definition_stored_past_the_put_check_is_still_refused_at_connect_time(
    hub: Any, admin_key: str, publish_key: str, receiver: Receiver, sessionmaker: Maker
) -> None:
    """The connect-time guard stays: a name may resolve elsewhere by the time of an
    attempt (DNS rebinding). A row written without the PUT's check stands in for it."""
    name = unique("rebound")
    values = {
        "tenant": "default",
        "name": name,
        "url": receiver.url("/internal"),
        "timeout_s": 2.0,
        "retry_intervals": "1s",
        "max_retries": 0,
        "alert_trigger": "never",
        "alert_after_n": None,
        "alert_emails": [],
        "alert_webhook_url": None,
        "need_confirm": False,
        "max_confirm_delay_s": 60,
    }
    async with sessionmaker.begin() as session:
        await repo.upsert_definition(session, values, signing.new_secret())
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    found = await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    assert "blocked" in found["attempts"][0]["error"]
    assert receiver.received == []


class TestAllowList:
    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        return reaching_localhost(settings)

    async def test_loopback_is_accepted_when_the_allow_list_covers_it(
        self, hub: Any, admin_key: str, receiver: Receiver
    ) -> None:
        for url in (receiver.url("/ok"), f"http://127.1:{receiver.port}/"):
            created = await define(hub.client, admin_key, unique("allowed"), url=url)
            assert created["url"] == url and created["warnings"] == []
        local = await define(hub.client, admin_key, unique("local"), url="http://localhost/")
        assert local["warnings"] == [
            "url: localhost also resolves to blocked ::1; attempts skip them"
        ]
        refused = await _put(hub, admin_key, unique("v6"), {"url": "http://[::1]/"})
        assert refused.status_code == 422
        assert '["::1/128"]' in refused.json()["detail"]
