"""E-mail delivery definitions end to end: a real hub, a real SMTP server on loopback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from email.message import Message
from typing import Any

import pytest

from notifyhub.db.models import DeliveryDefinition
from notifyhub.db.repositories.deliveries import Claimed
from notifyhub.services import signing
from notifyhub.services.email_target import EmailTarget
from notifyhub.services.sender import plan
from notifyhub.settings import DeliverySettings, Settings
from support.deliveries import define, post, unique, wait_status
from support.receiver import Receiver, free_port
from support.smtp import Smtp, smtp_server, smtp_settings

EMAIL = {
    "subject": "Order {{ order }}\nshipped",
    "text": "Hello {{ name }}, order {{ order }} is on its way.",
    "html": "<p>Hello <b>{{ name }}</b></p>",
    "locales": {"de": {"subject": "Bestellung {{ order }}", "text": "Hallo {{ name }}."}},
}


@pytest.fixture
def settings(settings: Settings, smtp: Smtp) -> Settings:
    return smtp_settings(
        settings,
        smtp,
        dispatcher_interval_s=0.05,
        jitter=0.0,
        lease_s=5,
        max_timeout_s=4,
    )


def _claimed() -> Claimed:
    return Claimed("01J0000000000000000000000", 1, "default", "d", {}, "pending", 0)


def _definition() -> DeliveryDefinition:
    return DeliveryDefinition(
        kind="email",
        retry_intervals="1s",
        max_retries=5,
        alert_trigger="never",
        alert_after_n=None,
        alert_emails=[],
        alert_webhook_url=None,
        need_confirm=False,
        disabled_at=None,
    )


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_an_email_definition_sends_text_and_html_with_a_message_id_from_the_delivery(
    hub: Any, admin_key: str, publish_key: str, smtp: Smtp
) -> None:
    name = unique("mail")
    shown = await define(
        hub.client, admin_key, name, kind="email", email={**EMAIL, "to": ["ops@shop.test"]}
    )
    assert (shown["kind"], shown["url"], shown["email"]["to"]) == ("email", None, ["ops@shop.test"])

    delivery_id = await post(hub.client, publish_key, name, {"order": 42, "name": "Ana"})
    found = await wait_status(hub.client, publish_key, delivery_id, "sent")

    assert [(a["status_code"], a["error"]) for a in found["attempts"]] == [(250, None)]
    [(rcpt, message)] = smtp.of(delivery_id)
    assert rcpt == ["ops@shop.test"]
    assert message["From"] == "hub@notifyhub.test" and message["To"] == "ops@shop.test"
    assert message["Subject"] == "Order 42 shipped"
    text = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    assert text is not None and html is not None
    assert text.get_content().strip() == "Hello Ana, order 42 is on its way."
    assert html.get_content().strip() == "<p>Hello <b>Ana</b></p>"


async def test_recipients_and_locale_come_from_the_payload(
    hub: Any, admin_key: str, publish_key: str, smtp: Smtp
) -> None:
    name = unique("mail-to")
    await define(hub.client, admin_key, name, kind="email", email=EMAIL)
    payload = {"order": 7, "name": "Jonas", "to": ["a@x.test", "b@x.test"], "locale": "de-AT"}
    delivery_id = await post(hub.client, publish_key, name, payload)
    await wait_status(hub.client, publish_key, delivery_id, "sent")

    [(rcpt, message)] = smtp.of(delivery_id)
    assert rcpt == ["a@x.test", "b@x.test"]
    assert message["Subject"] == "Bestellung 7"
    assert not message.is_multipart()  # the German message has no HTML template
    assert message.get_content().strip() == "Hallo Jonas."


async def test_a_550_ends_the_delivery_with_the_servers_reply_in_history(
    hub: Any, admin_key: str, publish_key: str, smtp: Smtp
) -> None:
    name = unique("mail-550")
    await define(
        hub.client,
        admin_key,
        name,
        kind="email",
        email={**EMAIL, "to": [f"{name}@shop.test"]},
        retry_intervals="1s",
        max_retries=5,
    )
    smtp.refuse(f"{name}@shop.test", "550 5.1.1 mailbox unavailable")
    delivery_id = await post(hub.client, publish_key, name, {"order": 1, "name": "N"})
    found = await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    [attempt] = found["attempts"]
    assert attempt["status_code"] == 550
    assert "mailbox unavailable" in attempt["error"]
    assert smtp.of(delivery_id) == []


async def test_a_451_retries_with_the_same_message_id(
    hub: Any, admin_key: str, publish_key: str, smtp: Smtp
) -> None:
    name = unique("mail-451")
    await define(
        hub.client,
        admin_key,
        name,
        kind="email",
        email={**EMAIL, "to": [f"{name}@shop.test"]},
        retry_intervals="1s",
    )
    smtp.refuse(f"{name}@shop.test", "451 4.3.0 try again later")
    delivery_id = await post(hub.client, publish_key, name, {"order": 2, "name": "N"})
    found = await wait_status(hub.client, publish_key, delivery_id, "sent")

    assert [a["status_code"] for a in found["attempts"]] == [451, 250]
    assert "try again later" in found["attempts"][0]["error"]
    assert f"<{delivery_id}@notifyhub>" in smtp.handler.refused
    assert len(smtp.of(delivery_id)) == 1


async def test_a_finally_failed_email_delivery_alerts_by_email_and_webhook_like_a_webhook(
    hub: Any, admin_key: str, publish_key: str, smtp: Smtp, receiver: Receiver
) -> None:
    name = unique("mail-alert")
    alert = {"trigger": "final_failure", "emails": ["ops@shop.test"], "webhook_url": receiver.url()}
    created = await define(hub.client, admin_key, name, kind="email",
                           email={**EMAIL, "to": [f"{name}@shop.test"]}, alert=alert)  # fmt: skip
    smtp.refuse(f"{name}@shop.test", "550 5.1.1 mailbox unavailable")
    delivery_id = await post(hub.client, publish_key, name, {"order": 3, "name": "N"})
    await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    [hook] = await receiver.wait_for("/hook", 1)
    body = json.loads(hook.body)
    said = (body["type"], body["delivery_id"], body["definition"], body["attempt"])
    assert said == ("delivery.final_failed", delivery_id, name, 1)
    assert "550 5.1.1 mailbox unavailable" in body["error"]
    assert signing.verify(created["secret"], hook.headers, hook.body, int(time.time()))

    def alerts() -> list[tuple[list[str], Message]]:
        return [m for m in smtp.handler.messages if delivery_id in str(m[1]["Subject"])]

    async with asyncio.timeout(10):
        while not alerts():
            await asyncio.sleep(0.05)
    for _ in range(3):  # more dispatcher ticks owe nothing more
        await hub.app_state["dispatcher"].run_once()
    [(rcpt, message)] = alerts()
    assert rcpt == ["ops@shop.test"] and "finally failed" in str(message["Subject"])
    assert len(receiver.at("/hook")) == 1


async def test_an_unreachable_smtp_server_is_a_retry_not_a_final_failure() -> None:
    settings = DeliverySettings(smtp_port=free_port(), smtp_timeout_s=2)
    target = EmailTarget(settings)
    payload = {"order": 1, "name": "N"}
    outcome = await target.send("01J0000000000000000000000", {**EMAIL, "to": ["x@a.test"]}, payload)
    await target.aclose()
    assert (outcome.ok, outcome.final, outcome.status_code) == (False, False, None)
    assert outcome.error is not None and "Connect call failed" in outcome.error
    plan_ = plan(_claimed(), _definition(), outcome, 0.0)
    assert (plan_.status, plan_.failures) == ("failed", 1)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"kind": "email"}, "kind `email` needs `email`"),
        ({"kind": "email", "url": "https://x.test/", "email": EMAIL}, "and no `url`"),
        ({"email": EMAIL}, "kind `webhook` needs `url`"),
        ({"kind": "email", "email": {**EMAIL, "to": ["not-an-address"]}}, "email.to"),
        ({"kind": "email", "email": {**EMAIL, "to": ["a,b@x.test"]}}, "email.to"),
        ({"kind": "email", "email": {**EMAIL, "text": "{{ broken"}}, "email.text: invalid"),
        ({"kind": "sms", "email": EMAIL}, "kind"),
        # no host name (IDNA refuses an empty label, or one past 63 characters): was 500
        ({"url": "http://a..b/x"}, "is not a host name"),
        ({"url": f"http://{'a' * 64}.test/x"}, "is not a host name"),
        ({"url": "https://ok.test/", "alert": {"webhook_url": "http://a..b/x"}}, "webhook_url"),
        # AMQP's short string is 255 bytes: 200 x "é" is 400 (was taken, then every
        # delivery failed in the AMQP client); NUL answered 500 (PostgreSQL)
        ({"kind": "rabbitmq", "rabbitmq": {"exchange": "", "routing_key": "é" * 200}}, "bytes"),
        ({"kind": "rabbitmq", "rabbitmq": {"exchange": "", "routing_key": "a\u0000b"}}, "key"),
    ],
)
async def test_bad_email_definitions_are_422_and_store_nothing(
    hub: Any, admin_key: str, body: dict[str, Any], expected: str
) -> None:
    name = unique("bad")
    path = f"/v1/admin/delivery-definitions/{name}"
    response = await hub.client.put(path, json=body, headers=_auth(admin_key))
    assert response.status_code == 422, response.text
    assert expected in response.text
    missing = await hub.client.get(path, headers=_auth(admin_key))
    assert missing.status_code == 404


async def test_webhook_definitions_read_as_kind_webhook(
    hub: Any, admin_key: str, publish_key: str
) -> None:
    name = unique("hook")
    shown = await define(hub.client, admin_key, name, url="https://example.com/hook")
    assert (shown["kind"], shown["url"]) == ("webhook", "https://example.com/hook")
    assert (shown["email"], shown["rabbitmq"]) == (None, None)


async def test_tenant_a_cannot_read_use_or_repoint_bs_email_definition(
    hub: Any, create_key: Callable[..., Awaitable[str]], smtp: Smtp
) -> None:
    a, b = unique("ta"), unique("tb")
    a_admin = await create_key(f"{a}-admin", "admin", a)
    a_publish = await create_key(f"{a}-publish", "publish", a)
    b_admin = await create_key(f"{b}-admin", "admin", b)
    name = unique("mail")
    path = f"/v1/admin/delivery-definitions/{name}"
    email = {**EMAIL, "to": ["b-ops@b.test"]}
    await define(hub.client, b_admin, name, tenant=b, kind="email", email=email)

    for key in (a_admin, a_publish):
        read = await hub.client.get(path, params={"tenant": b}, headers=_auth(key))
        assert read.status_code == 403, read.text
    own = await hub.client.get(path, params={"tenant": a}, headers=_auth(a_admin))
    assert own.status_code == 404 and "b-ops" not in own.text
    repoint = {"kind": "email", "email": {**EMAIL, "to": ["thief@a.test"]}}
    for params, body in (({"tenant": b}, {}), ({}, {"tenant": b})):
        response = await hub.client.put(
            path, params=params, json={**repoint, **body}, headers=_auth(a_admin)
        )
        assert response.status_code == 403, response.text
    for tenant, expected in ((b, 403), (a, 422)):
        body = {"definition": name, "payload": {"order": 1, "name": "x"}, "tenant": tenant}
        response = await hub.client.post("/v1/deliveries", json=body, headers=_auth(a_publish))
        assert response.status_code == expected, response.text

    seen = await hub.client.get(path, params={"tenant": b}, headers=_auth(b_admin))
    assert seen.json()["email"]["to"] == ["b-ops@b.test"]
    assert not [m for m in smtp.handler.messages if "thief@a.test" in m[0]]


async def test_a_payload_to_that_is_not_an_address_ends_the_delivery_unsent(
    hub: Any, admin_key: str, publish_key: str, smtp: Smtp
) -> None:
    """A line break in the payload's `to` would write headers of its own (a Bcc): the
    delivery ends as a final failure that names the address, and nothing is sent."""
    name = unique("mail-bad-to")
    await define(hub.client, admin_key, name, kind="email", email=EMAIL)
    payload = {"order": 7, "name": "Jonas", "to": ["a@x.test\r\nBcc: victim@y.test"]}
    delivery_id = await post(hub.client, publish_key, name, payload)
    found = await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    [attempt] = found["attempts"]
    assert "is not an e-mail address" in attempt["error"]
    assert smtp.of(delivery_id) == []


async def test_a_payload_to_that_is_no_address_or_list_ends_the_delivery_unsent(
    hub: Any, admin_key: str, publish_key: str, smtp: Smtp
) -> None:
    """A number as `to` raised TypeError in the sender (no e-mail, no settlement: its
    batch was sent again after every lease); it is a final failure naming `to`."""
    name = unique("mail-num-to")
    await define(hub.client, admin_key, name, kind="email", email=EMAIL)
    delivery_id = await post(hub.client, publish_key, name, {"order": 1, "to": 123})
    found = await wait_status(hub.client, publish_key, delivery_id, "final_failed")

    [attempt] = found["attempts"]
    assert "an address or a list of addresses, not int" in attempt["error"]
    assert smtp.of(delivery_id) == []


async def test_an_idn_domain_is_sent_in_idna_form_and_a_non_ascii_mailbox_with_smtputf8(
    hub: Any, admin_key: str, publish_key: str, smtp: Smtp
) -> None:
    """The envelope names a non-ASCII domain in its IDNA form, which every server takes.
    A non-ASCII local part has no such form: its transaction asks for SMTPUTF8."""
    name = unique("mail-idn")
    await define(hub.client, admin_key, name, kind="email", email=EMAIL)
    payload = {"order": 1, "name": "Jörg", "to": ["ops@bücher.test", "jörg@x.test"]}
    delivery_id = await post(hub.client, publish_key, name, payload)
    await wait_status(hub.client, publish_key, delivery_id, "sent")
    [(rcpt, message)] = smtp.of(delivery_id)
    assert rcpt == ["ops@xn--bcher-kva.test", "jörg@x.test"]
    assert message["To"] == "ops@xn--bcher-kva.test, jörg@x.test"


async def test_a_non_ascii_mailbox_is_not_sent_to_a_server_without_smtputf8() -> None:
    """aiosmtplib refuses before `MAIL FROM` (a retry, as for any server that lacks a
    feature: its operator may add it); an ASCII address still goes."""
    with smtp_server(smtputf8=False) as server:
        target = EmailTarget(DeliverySettings(smtp_port=server.port))
        try:
            refused = await target.send(
                "01J0000000000000000000000", {"subject": "s", "text": "t"}, {"to": "jörg@x.test"}
            )
            sent = await target.send(
                "01J0000000000000000000001", {"subject": "s", "text": "t"}, {"to": "jo@x.test"}
            )
        finally:
            await target.aclose()
    assert (refused.status_code, refused.final, refused.accepted) == (None, False, False)
    assert "SMTPUTF8 is not supported" in (refused.error or "")
    assert sent.accepted and [rcpt for rcpt, _ in server.handler.messages] == [["jo@x.test"]]
