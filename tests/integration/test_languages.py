"""Languages: a user's locale in their preferences picks a rule's (or a producer's)
translation by the fallback chain pt-BR -> pt -> default; one notification per
translation; tenants keep their own users' locales."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from notifyhub.db.engine import create_engine
from notifyhub.workers.producers import load
from support.producers import hub_producer


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _set_locale(hub: Any, user: str, locale: str | None, tenant: str = "default") -> None:
    token = hub.tokens.mint_user_token(user, tenant)
    body = {"categories": {}, "locale": locale}
    put = await hub.client.put("/v1/me/preferences", json=body, headers=_auth(token))
    assert put.status_code == 200, put.text
    got = (await hub.client.get("/v1/me/preferences", headers=_auth(token))).json()
    assert got["locale"] == locale


async def _titles(hub: Any, user: str, tenant: str = "default") -> list[str]:
    token = hub.tokens.mint_user_token(user, tenant)
    items = (await hub.client.get("/v1/me/notifications", headers=_auth(token))).json()["items"]
    return [i["title"] for i in items]


async def test_a_rule_speaks_each_users_language(
    hub: Any, admin_key: str, publish_key: str
) -> None:
    run = secrets.token_hex(3)
    users = {f"br-{run}": "pt-BR", f"pt-{run}": "pt-PT", f"fr-{run}": "fr", f"none-{run}": None}
    for user, locale in users.items():
        await _set_locale(hub, user, locale)
    rule = {
        "target_type": "invoice",
        "recipients": [
            {
                "relationship": "payer",
                "title": "Invoice {{ target.id }} is due",
                "locales": {
                    "pt": {"title": "Fatura {{ target.id }} vence hoje"},
                    "pt-BR": {"title": "Boleto {{ target.id }} vence hoje", "body": "Pague já"},
                },
            }
        ],
    }
    admin = _auth(admin_key)
    assert (
        await hub.client.put(f"/v1/admin/rules/due-{run}", json=rule, headers=admin)
    ).status_code == 201
    got = (await hub.client.get(f"/v1/admin/rules/due-{run}", headers=admin)).json()
    assert got["recipients"][0]["locales"]["pt-BR"] == {
        "title": "Boleto {{ target.id }} vence hoje",
        "body": "Pague já",
    }
    target = {"type": "invoice", "id": f"I-{run}"}  # its payers are this test's alone
    for user in users:
        body = {"user": user, "relationship": "payer", "target": target}
        relate = await hub.client.post("/v1/relationships", json=body, headers=_auth(publish_key))
        assert relate.status_code == 204
    event = {"rule": f"due-{run}", "actor": {"id": "billing", "type": "service"}, "target": target}
    fired = await hub.client.post("/v1/events", json=event, headers=_auth(publish_key))
    assert fired.status_code == 202, fired.text
    assert (fired.json()["notifications"], fired.json()["recipients"]) == (3, 4)
    expected = {
        f"br-{run}": f"Boleto I-{run} vence hoje",
        f"pt-{run}": f"Fatura I-{run} vence hoje",  # pt-PT -> pt
        f"fr-{run}": f"Invoice I-{run} is due",  # no fr: the default
        f"none-{run}": f"Invoice I-{run} is due",
    }
    for user, title in expected.items():
        assert await _titles(hub, user) == [title]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"categories": {}, "locale": "portuguese!"}, "locale"),
        ({"categories": {}, "locale": "p"}, "locale"),
        ({"categories": {}, "locale": "x" * 36}, "locale"),
    ],
)
async def test_a_bad_locale_is_refused(hub: Any, body: dict[str, Any], needle: str) -> None:
    token = hub.tokens.mint_user_token(f"bad-{secrets.token_hex(3)}")
    put = await hub.client.put("/v1/me/preferences", json=body, headers=_auth(token))
    assert put.status_code == 422 and needle in put.text
    assert (await hub.client.get("/v1/me/preferences", headers=_auth(token))).json()[
        "locale"
    ] is None


async def test_bad_translations_are_refused(hub: Any, admin_key: str) -> None:
    rule = {
        "target_type": "x",
        "recipients": [
            {"relationship": "r", "title": "t", "locales": {"pt": {"title": "{% if %}"}}}
        ],
    }
    put = await hub.client.put("/v1/admin/rules/bad-locale", json=rule, headers=_auth(admin_key))
    assert put.status_code == 422 and "recipients.0.locales.pt.title" in put.text
    rule["recipients"][0]["locales"] = {"not a tag": {"title": "t"}}
    put = await hub.client.put("/v1/admin/rules/bad-locale", json=rule, headers=_auth(admin_key))
    assert put.status_code == 422


async def test_locales_are_per_tenant(hub: Any, create_key: Any) -> None:
    """The same user id in two tenants has two locales."""
    user = f"twin-{secrets.token_hex(3)}"
    await _set_locale(hub, user, "de", "ten-a")
    await _set_locale(hub, user, "pt", "ten-b")
    for tenant, locale in (("ten-a", "de"), ("ten-b", "pt")):
        token = hub.tokens.mint_user_token(user, tenant)
        got = (await hub.client.get("/v1/me/preferences", headers=_auth(token))).json()
        assert got["locale"] == locale


YAML = """
producers:
  - name: overdue-{suffix}
    database_url: "{database_url}"
    query: "SELECT id FROM {table}"
    recipients: {{topics: [billing-{suffix}]}}
    title: "Order {{{{ row.id }}}} is overdue"
    locales:
      pt: {{title: "Pedido {{{{ row.id }}}} atrasado"}}
    dedupe_columns: [id]
"""


async def test_a_producer_speaks_each_users_language(
    hub: Any, admin_key: str, settings: Any, tmp_path: Path
) -> None:
    suffix = secrets.token_hex(3)
    table = f"orders_{suffix}"
    ana, bob = f"ana-{suffix}", f"bob-{suffix}"
    await _set_locale(hub, ana, "pt-BR")
    engine = create_engine(settings.database_url)
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE TABLE {table} (id text)"))
        await conn.execute(text(f"INSERT INTO {table} VALUES ('O-1')"))
    await hub.client.put(
        f"/v1/admin/topics/billing-{suffix}",
        json={"users": [ana, bob]},
        headers=_auth(admin_key),
    )
    path = tmp_path / "producers.yaml"
    path.write_text(YAML.format(suffix=suffix, database_url=settings.database_url, table=table))
    [config] = load(path)
    producer = hub_producer(hub, config)
    try:
        assert await producer.run_once() == 1
    finally:
        await producer.close()
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP TABLE {table}"))
        await engine.dispose()
    assert await _titles(hub, ana) == ["Pedido O-1 atrasado"]
    assert await _titles(hub, bob) == ["Order O-1 is overdue"]
