"""SSRF guard: every RELIABILITY.md vector is refused at connect time, never reached."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from notifyhub.services.outbound import AddressGuard, Outbound
from support.deliveries import define, post, unique, wait_status
from support.receiver import Receiver, Reply


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


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
        f"http://0177.0.0.1:{port}/v",  # octal
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://172.16.0.1/",
        "http://100.64.0.1/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://224.0.0.1/",
    ]


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


async def test_the_hub_refuses_loopback_when_private_networks_are_not_allowed(
    hub, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("ssrf")
    await define(hub.client, admin_key, name, url=receiver.url("/internal"), max_retries=0)
    delivery_id = await post(hub.client, publish_key, name, {"n": 1})
    found = await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    assert "blocked" in found["attempts"][0]["error"]
    assert receiver.received == []
