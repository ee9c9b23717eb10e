"""A definition's URLs judged at PUT time by the SSRF guard's own rule (services/targets.py)."""

from __future__ import annotations

import asyncio

import pytest

from notifyhub.errors import BlockedTarget, InvalidInput
from notifyhub.services.outbound import AddressGuard
from notifyhub.services.targets import (
    ALLOW_NETWORKS_ENV,
    ALLOW_PRIVATE_ENV,
    TargetCheck,
    literal_addresses,
)
from notifyhub.settings import Settings


def resolving(answers: dict[str, list[str]]) -> TargetCheck:
    """A check whose resolver knows only `answers` (any other name does not resolve)."""

    async def resolve(host: str) -> list[str]:
        if host not in answers:
            raise OSError(f"unknown host {host}")
        return answers[host]

    return TargetCheck(AddressGuard(), resolve)


async def never(host: str) -> list[str]:
    raise AssertionError(f"{host} is a literal: no resolver needed")


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.1", ["127.0.0.1"]),
        ("2130706433", ["127.0.0.1"]),
        ("0x7f000001", ["127.0.0.1"]),
        ("0177.0.0.1", ["127.0.0.1"]),
        ("0", ["0.0.0.0"]),
        ("::1", ["::1"]),
        ("::ffff:127.0.0.1", ["::ffff:127.0.0.1"]),
        ("localhost", ["127.0.0.1", "::1"]),
        ("localhost.", ["127.0.0.1", "::1"]),
        ("api.localhost", ["127.0.0.1", "::1"]),
        ("example.com", None),
        ("127.0.0.1.example.com", None),
    ],
)
def test_literals_are_read_as_the_resolver_reads_them(
    host: str, expected: list[str] | None
) -> None:
    assert literal_addresses(host) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://127.1:8080/",
        "http://2130706433/",
        "http://0/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://localhost/",
    ],
)
async def test_blocked_literals_are_refused_without_a_resolver(url: str) -> None:
    with pytest.raises(BlockedTarget) as refused:
        await TargetCheck(AddressGuard(), never).check("url", url)
    assert f"{ALLOW_PRIVATE_ENV}=true" in refused.value.detail
    assert f"{ALLOW_NETWORKS_ENV}='[" in refused.value.detail


async def test_a_name_resolving_only_to_blocked_addresses_is_refused() -> None:
    check = resolving({"internal.example": ["10.0.0.5", "fd00::5"]})
    with pytest.raises(BlockedTarget) as refused:
        await check.check("alert.webhook_url", "https://internal.example/hook")
    detail = refused.value.detail
    assert detail.startswith("alert.webhook_url: the SSRF guard blocks https://internal.example/")
    assert "internal.example resolves only to 10.0.0.5 (a private address" in detail
    assert """='["10.0.0.5/32", "fd00::5/128"]'""" in detail


async def test_a_name_with_one_public_address_is_accepted_with_a_warning() -> None:
    check = resolving({"mixed.example": ["10.0.0.5", "93.184.216.34"]})
    warning = await check.check("url", "https://mixed.example/")
    assert warning == "url: mixed.example also resolves to blocked 10.0.0.5; attempts skip them"
    assert (
        await resolving({"ok.example": ["93.184.216.34"]}).check("url", "https://ok.example/")
        is None
    )


async def test_a_name_that_does_not_resolve_is_accepted_with_a_warning() -> None:
    warning = await resolving({}).check("url", "https://gone.example/")
    assert warning is not None and warning.startswith("url: gone.example does not resolve now")


async def test_a_slow_resolver_is_given_up_on() -> None:
    async def hang(host: str) -> list[str]:
        await asyncio.sleep(10)
        return []

    warning = await TargetCheck(AddressGuard(), hang, timeout_s=0.05).check("url", "http://a.b/")
    assert warning == (
        "url: a.b does not resolve now (no answer within 0.05s); accepted, "
        "and checked again by the SSRF guard before every attempt"
    )


async def test_the_allow_list_and_private_networks_admit_what_they_name() -> None:
    allowed = TargetCheck(AddressGuard(allow=["127.0.0.1/32"]), never)
    assert await allowed.check("url", "http://127.1:9000/") is None
    assert await allowed.check("url", "http://[::ffff:127.0.0.1]/") is None
    with pytest.raises(BlockedTarget):
        await allowed.check("url", "http://127.0.0.2/")
    assert (
        await TargetCheck(AddressGuard(allow_private=True), never).check("url", "http://0/") is None
    )


def test_the_settings_named_in_a_refusal_are_the_ones_that_configure_the_guard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ALLOW_PRIVATE_ENV, "true")
    monkeypatch.setenv(ALLOW_NETWORKS_ENV, '["127.0.0.1/32"]')
    settings = Settings(dev_mode=True, _env_file=None)  # type: ignore[call-arg]
    assert settings.deliveries_allow_private_networks is True
    assert settings.deliveries.allow_networks == ["127.0.0.1/32"]


async def test_a_url_the_sender_cannot_read_is_refused_with_its_ascii_spelling() -> None:
    with pytest.raises(InvalidInput) as refused:
        await TargetCheck(AddressGuard(), never).check("url", "https://bücher.example/ü")
    assert refused.value.detail.endswith("write it as https://xn--bcher-kva.example/%C3%BC")
    assert not isinstance(refused.value, BlockedTarget)
