"""Retry schedules, alert triggers, Retry-After and the address guard (pure logic)."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime

import pytest

from notifyhub.domain.delivery import (
    AlertPolicy,
    AlertTrigger,
    RetryPolicy,
    parse_intervals,
)
from notifyhub.services.outbound import AddressGuard, blocked_because, retry_after_s


def test_intervals_parse_one_or_a_list() -> None:
    assert parse_intervals("5s,5m,1h,1d") == [5, 300, 3600, 86400]
    assert parse_intervals("30s") == [30]
    assert parse_intervals("250ms, 2") == [0.25, 2]
    for bad in ("", "5 parsecs", "0s", "8d", ",".join(["1s"] * 21)):
        with pytest.raises(ValueError, match="duration"):
            parse_intervals(bad)


def test_the_last_interval_repeats_and_jitter_stays_in_bounds() -> None:
    policy = RetryPolicy([5, 300, 3600], max_retries=-1, jitter=0.1)
    assert 4.5 <= policy.delay_s(1) <= 5.5
    assert 270 <= policy.delay_s(2) <= 330
    assert all(3240 <= policy.delay_s(n) <= 3960 for n in (3, 4, 50))
    assert not policy.exhausted(10**6)


def test_max_retries_counts_retries_after_the_first_attempt() -> None:
    policy = RetryPolicy([1], max_retries=2, jitter=0)
    assert [policy.exhausted(n) for n in (1, 2, 3)] == [False, False, True]


def test_retry_after_is_a_floor_on_the_delay() -> None:
    policy = RetryPolicy([1], max_retries=-1, jitter=0)
    assert policy.delay_s(1, retry_after_s=120) == 120
    assert policy.delay_s(1, retry_after_s=0.1) == 1


@pytest.mark.parametrize(
    ("trigger", "fired"),
    [
        (AlertTrigger.EVERY_FAILURE, [True, True, True]),
        (AlertTrigger.FINAL_FAILURE, [False, False, True]),
        (AlertTrigger.AFTER_N, [False, True, False]),
        (AlertTrigger.NEVER, [False, False, False]),
    ],
)
def test_alert_triggers(trigger: AlertTrigger, fired: list[bool]) -> None:
    policy = AlertPolicy(trigger, after_n=2)
    assert [policy.fires(n, final=n == 3) for n in (1, 2, 3)] == fired


def test_retry_after_header_forms() -> None:
    now = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s("120") == 120
    assert retry_after_s("Sun, 22 Nov 2026 12:01:00 GMT", now) == 60
    assert retry_after_s("soon") is None
    assert retry_after_s(None) is None


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:10.0.0.1",
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1:7f00:0:100::",  # NAT64 /48 (RFC 6052) of 127.0.0.1
        "::127.0.0.1",  # IPv4-compatible
        "::10.0.0.1",
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
    ],
)
def test_guard_blocks_internal_addresses(address: str) -> None:
    assert not AddressGuard().permits(ipaddress.ip_address(address))


def test_guard_permits_public_addresses_and_its_allow_list() -> None:
    guard = AddressGuard(allow=["127.0.0.1/32"])
    assert guard.permits(ipaddress.ip_address("93.184.216.34"))
    assert guard.permits(ipaddress.ip_address("2606:2800:220:1::1"))
    assert guard.permits(ipaddress.ip_address("127.0.0.1"))
    assert guard.permits(ipaddress.ip_address("::ffff:127.0.0.1"))
    assert not guard.permits(ipaddress.ip_address("127.0.0.2"))
    assert AddressGuard(allow_private=True).permits(ipaddress.ip_address("10.0.0.1"))


def test_guard_names_the_ipv4_address_a_translated_one_carries() -> None:
    why = AddressGuard().refusal(ipaddress.ip_address("64:ff9b::a9fe:a9fe"))
    assert why is not None and "169.254.169.254" in why and "NAT64" in why
    # a translated public address stays as public as the IPv4 one it carries
    assert blocked_because(ipaddress.ip_address("2002:5db8:d822::1")) is None


def test_settings_refuse_a_lease_shorter_than_a_request() -> None:
    from pydantic import ValidationError

    from notifyhub.settings import DeliverySettings

    with pytest.raises(ValidationError, match="lease_s must exceed"):
        DeliverySettings(lease_s=10, max_timeout_s=30)
