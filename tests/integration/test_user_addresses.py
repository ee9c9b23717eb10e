"""Users' addresses an admin sets (`PUT /v1/admin/users/{tenant}/{user}`): e-mail,
locale and time zone, each left alone when left out and cleared by null; what the GET
and the user's own preferences then show; refusals at the edge; the audit entry."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from notifyhub.db.repositories import profiles

CreateKey = Callable[..., Awaitable[str]]


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def tenant_admin(create_key: CreateKey) -> tuple[str, dict[str, str]]:
    tenant = f"ad-{secrets.token_hex(3)}"
    return tenant, _auth(await create_key("addresses", "admin", tenant))


async def _put(hub: Any, headers: dict[str, str], tenant: str, user: str, body: Any) -> Any:
    return await hub.client.put(f"/v1/admin/users/{tenant}/{user}", json=body, headers=headers)


async def _get(hub: Any, headers: dict[str, str], tenant: str, user: str) -> dict[str, Any]:
    answer = await hub.client.get(f"/v1/admin/users/{tenant}/{user}", headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_put_sets_reads_back_and_changes_only_what_is_named(
    hub: Any, tenant_admin: tuple[str, dict[str, str]], make_token: Callable[..., str]
) -> None:
    tenant, h = tenant_admin
    body = {"email": "alice@example.com", "locale": "pt-BR", "time_zone": "America/Sao_Paulo"}
    answer = await _put(hub, h, tenant, "alice", body)
    assert answer.status_code == 201, answer.text  # the first addresses: created
    assert answer.json() == {"tenant": tenant, "user": "alice", **body, "quiet": None}
    found = await _get(hub, h, tenant, "alice")
    assert (found["email"], found["locale"], found["time_zone"]) == (
        "alice@example.com",
        "pt-BR",
        "America/Sao_Paulo",
    )
    assert found["preferences"]["locale"] == "pt-BR"  # one locale, wherever it is read
    own = await hub.client.get("/v1/me/preferences", headers=_auth(make_token("alice", tenant)))
    assert own.json()["locale"] == "pt-BR"

    answer = await _put(hub, h, tenant, "alice", {"time_zone": "Europe/Lisbon"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        **body,
        "tenant": tenant,
        "user": "alice",
        "time_zone": "Europe/Lisbon",
        "quiet": None,
    }
    answer = await _put(hub, h, tenant, "alice", {"email": None, "locale": None})
    assert answer.json() == {
        "tenant": tenant,
        "user": "alice",
        "email": None,
        "locale": None,
        "time_zone": "Europe/Lisbon",
        "quiet": None,
    }
    assert (await _put(hub, h, tenant, "alice", {})).json()["time_zone"] == "Europe/Lisbon"


async def test_a_user_nobody_described_has_empty_addresses(
    hub: Any, tenant_admin: tuple[str, dict[str, str]]
) -> None:
    tenant, h = tenant_admin
    found = await _get(hub, h, tenant, "nobody")
    assert (found["email"], found["locale"], found["time_zone"]) == (None, None, None)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"time_zone": "Mars/Olympus_Mons"}, "time_zone"),
        ({"time_zone": "../../etc/passwd"}, "time_zone"),
        ({"time_zone": ""}, "time_zone"),
        ({"time_zone": "America"}, "time_zone"),  # a folder of the tz database, not a zone
        ({"time_zone": "America/Argentina"}, "time_zone"),
        ({"time_zone": "zone.tab"}, "time_zone"),
        ({"time_zone": "localtime"}, "time_zone"),  # the hub host's zone, whatever it is
        ({"time_zone": "posixrules"}, "time_zone"),
        ({"time_zone": "right/UTC"}, "time_zone"),  # leap-second variants: not zone names
        ({"email": "not-an-address"}, "email"),
        ({"email": "two@at@signs"}, "email"),
        ({"email": "a b@example.com"}, "email"),
        ({"email": "x" * 250 + "@example.com"}, "email"),
        ({"email": "a,b@example.com"}, "email"),  # RCPT TO:<a>, not what the hub said
        ({"email": "<a>@example.com"}, "email"),
        ({"email": "a(comment)@example.com"}, "email"),
        ({"locale": "not a locale"}, "locale"),
        ({"email": 42}, "email"),
        ({"phone": "+351"}, "phone"),
    ],
)
async def test_bad_addresses_are_422_naming_the_field_and_change_nothing(
    hub: Any, tenant_admin: tuple[str, dict[str, str]], body: dict[str, Any], field: str
) -> None:
    tenant, h = tenant_admin
    good = {"email": "bob@example.com", "time_zone": "UTC"}
    assert (await _put(hub, h, tenant, "bob", good)).status_code == 201
    answer = await _put(hub, h, tenant, "bob", body)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert field in answer.text
    found = await _get(hub, h, tenant, "bob")
    assert (found["email"], found["time_zone"], found["locale"]) == ("bob@example.com", "UTC", None)


async def test_the_change_is_audited(hub: Any, tenant_admin: tuple[str, dict[str, str]]) -> None:
    tenant, h = tenant_admin
    assert (await _put(hub, h, tenant, "carol", {"time_zone": "UTC"})).status_code == 201
    entries = (await hub.client.get("/v1/admin/audit", headers=h)).json()["entries"]
    mine = [e for e in entries if e["method"] == "PUT" and "carol" in (e["target"] or "")]
    assert mine and mine[0]["tenant"] == tenant and mine[0]["status"] == 201
    assert mine[0]["route"] == "/v1/admin/users/{tenant}/{user}"


async def test_emails_of_answers_those_who_gave_one(hub: Any, tenant_admin: Any) -> None:
    tenant, h = tenant_admin
    await _put(hub, h, tenant, "dan", {"email": "dan@example.com"})
    await _put(hub, h, tenant, "eve", {"time_zone": "UTC"})
    async with hub.app_state["sessionmaker"]() as session:
        found = await profiles.emails_of(session, tenant, ["dan", "eve", "frank"])
        elsewhere = await profiles.emails_of(session, "other-tenant", ["dan"])
    assert (found, elsewhere) == ({"dan": "dan@example.com"}, {})
