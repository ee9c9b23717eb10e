"""Web Push and the preference matrix in headless Chromium (the demo's Settings panel).

What is real here: the demo's switch, notifyhub.js's `enablePush()`/`disablePush()`, the
service worker's registration and activation, the Notification permission (granted by
the test as a user would), the hub's VAPID key and push-subscription endpoints, and the
worker's `push` handler (a push delivered to it through the DevTools protocol, the way
DevTools' "Push" button does, shows a system notification the test reads back).

What is not: headless Chromium here cannot reach a push service (FCM), so the page's
`PushManager.prototype.subscribe` is replaced by an init script that answers a
subscription made in the test (a real P-256 key, a random auth secret); the hub must store
exactly what that `toJSON()` gives. The worker's `notificationclick` (focus or open
`action_url`) cannot be clicked headless: its URL rule is tested as a pure function.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from test_browser import publish

from notifyhub.db.models import PushSubscription

pytestmark = pytest.mark.slow

SW_PATH = "/static/notifyhub-push-sw.js"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "demo-settings.png"
READY = "() => window.notifyhubDemo?.ready === true"

# The page's PushManager answers the subscription the test made (no push service here).
STUB_PUSH = """(subscription) => {
  const state = { subscribed: false, calls: [] };
  window.__nhPush = state;
  const fake = {
    endpoint: subscription.endpoint,
    expirationTime: null,
    options: { userVisibleOnly: true, applicationServerKey: null },
    toJSON() { return JSON.parse(JSON.stringify(subscription)); },
    async unsubscribe() { state.subscribed = false; return true; },
  };
  PushManager.prototype.subscribe = async function (options) {
    const key = new Uint8Array(options.applicationServerKey);
    state.calls.push({ userVisibleOnly: options.userVisibleOnly, key: Array.from(key) });
    fake.options = { userVisibleOnly: options.userVisibleOnly, applicationServerKey: key.buffer };
    state.subscribed = true;
    return fake;
  };
  PushManager.prototype.getSubscription = async function () {
    return state.subscribed ? fake : null;
  };
}"""

REGISTRATION = """async (url) => {
  const found = await navigator.serviceWorker.getRegistration(url);
  return found && found.active ? { script: found.active.scriptURL, scope: found.scope } : null;
}"""


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fake_subscription() -> dict[str, Any]:
    """What a browser's `PushSubscription.toJSON()` gives: an endpoint, a P-256 key, auth."""
    point = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )
    return {
        "endpoint": f"https://fcm.googleapis.com/fcm/send/{uuid.uuid4().hex}",
        "expirationTime": None,
        "keys": {"p256dh": b64url(point), "auth": b64url(secrets.token_bytes(16))},
    }


@pytest.fixture
async def push_context(browser: Any, browser_hub: Any) -> AsyncIterator[Any]:
    """A fresh profile that allowed this hub's notifications (the user said yes)."""
    ctx = await browser.new_context()
    await ctx.grant_permissions(["notifications"], origin=browser_hub.base_url)
    yield ctx
    await ctx.close()


async def open_demo(context: Any, base_url: str, token: str) -> Any:
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    await page.goto(f"{base_url}/demo#token={token}")
    await page.wait_for_function(READY, timeout=15_000)
    await page.locator("[data-testid=settings-toggle]").click()
    return page


async def hub_get(base_url: str, token: str, path: str) -> Any:
    async with httpx.AsyncClient(base_url=base_url) as client:
        answer = await client.get(path, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def listed(answer: Any) -> list[dict[str, Any]]:
    return list(answer if isinstance(answer, list) else answer.get("subscriptions", []))


async def test_the_switch_registers_the_worker_and_the_hub_stores_the_subscription(
    push_context: Any,
    browser_hub: Any,
    make_token: Any,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    base = browser_hub.base_url
    user = f"push-{uuid.uuid4().hex[:8]}"
    token = make_token(user)
    subscription = fake_subscription()
    await push_context.add_init_script(f"({STUB_PUSH})({json.dumps(subscription)})")
    page = await open_demo(push_context, base, token)
    switch = page.locator("[data-testid=push-switch]")
    await page.locator("[data-testid=push-state][data-state=disabled]").wait_for()
    assert await page.evaluate(REGISTRATION, f"{base}{SW_PATH}") is None

    await switch.check()
    await page.locator("[data-testid=push-state][data-state=enabled]").wait_for()
    registration = await page.evaluate(REGISTRATION, f"{base}{SW_PATH}")
    assert registration == {"script": f"{base}{SW_PATH}", "scope": f"{base}/static/"}
    [call] = await page.evaluate("window.__nhPush.calls")
    key = (await hub_get(base, token, "/v1/me/push-key"))["public_key"]
    assert call == {"userVisibleOnly": True, "key": list(unb64url(key))}
    [stored] = listed(await hub_get(base, token, "/v1/me/push-subscriptions"))
    assert stored["endpoint"] == subscription["endpoint"]
    async with sessionmaker() as session:  # the keys, which the hub's answers leave out
        row = await session.scalar(
            select(PushSubscription).where(PushSubscription.id == stored["id"])
        )
    assert row is not None
    assert (row.tenant, row.user_id, row.endpoint) == ("default", user, subscription["endpoint"])
    assert {"p256dh": row.p256dh, "auth": row.auth} == subscription["keys"]
    assert row.expiration_time is None
    assert await page.evaluate("notifyhubDemo.push.subscription.id") == stored["id"]

    await switch.uncheck()
    await page.locator("[data-testid=push-state][data-state=disabled]").wait_for()
    assert listed(await hub_get(base, token, "/v1/me/push-subscriptions")) == []
    assert page.errors == []


async def test_a_denied_permission_says_so(browser: Any, browser_hub: Any, make_token: Any) -> None:
    """Notifications blocked for the site: the switch stays off and says why."""
    ctx = await browser.new_context()
    try:
        page = await open_demo(ctx, browser_hub.base_url, make_token("push-denied"))
        await page.evaluate(
            "Object.defineProperty(Notification, 'permission', {get: () => 'denied'});"
            "Notification.requestPermission = async () => 'denied'; true"
        )
        reason = await page.evaluate("notifyhubDemo.client.enablePush().catch(e => e.reason)")
        assert reason == "denied"
        assert await page.evaluate("notifyhubDemo.client.pushState()") == "denied"
    finally:
        await ctx.close()


NOTIFICATIONS = """async (url) => {
  const registration = await navigator.serviceWorker.getRegistration(url);
  const shown = await registration.getNotifications();
  return shown.map((n) => ({ title: n.title, body: n.body, tag: n.tag, data: n.data }));
}"""


async def test_the_workers_push_handler_shows_the_notification(
    push_context: Any, browser_hub: Any, make_token: Any
) -> None:
    """A push delivered to the registered worker (DevTools protocol) shows a notification
    with the title, body, the thread as its tag and the action_url for a click."""
    base = browser_hub.base_url
    page = await open_demo(push_context, base, make_token("push-sw"))
    await page.evaluate(
        "async (url) => { const r = await navigator.serviceWorker.register(url);"
        " await new Promise((ok) => r.active ? ok() : r.installing.addEventListener("
        "'statechange', (e) => e.target.state === 'activated' && ok())); return true; }",
        f"{base}{SW_PATH}",
    )
    cdp = await push_context.new_cdp_session(page)
    registrations: list[dict[str, Any]] = []
    cdp.on(
        "ServiceWorker.workerRegistrationUpdated",
        lambda e: registrations.extend(e["registrations"]),
    )
    await cdp.send("ServiceWorker.enable")
    async with asyncio.timeout(10):
        while not registrations:  # enabling reports the registrations as an event
            await asyncio.sleep(0.05)
    [registration_id] = {r["registrationId"] for r in registrations if not r["isDeleted"]}
    wrapped = {
        "notification": {
            "id": "01JTESTPUSH0000000000000001",
            "title": "Order 42 shipped",
            "body": "It arrives on Friday",
            "action_url": "/orders/42",
            "thread_key": "order-42",
            "severity": "info",
        }
    }
    bare = {"title": "Password changed", "body": "Just now", "action_url": "javascript:alert(1)"}
    for payload in (wrapped, bare):
        await cdp.send(
            "ServiceWorker.deliverPushMessage",
            {"origin": base, "registrationId": registration_id, "data": json.dumps(payload)},
        )
    shown: list[dict[str, Any]] = []
    async with asyncio.timeout(10):
        while len(shown) < 2:  # each push is handled in its own event: poll what is shown
            await asyncio.sleep(0.05)
            shown = await page.evaluate(NOTIFICATIONS, f"{base}{SW_PATH}")
    shown.sort(key=lambda n: str(n["title"]))
    assert shown == [
        {
            "title": "Order 42 shipped",
            "body": "It arrives on Friday",
            "tag": "order-42",
            "data": {"id": "01JTESTPUSH0000000000000001", "action_url": f"{base}/orders/42"},
        },
        {
            "title": "Password changed",
            "body": "Just now",
            "tag": "",
            "data": {"id": None, "action_url": None},  # javascript: is never opened
        },
    ]


async def test_the_workers_click_rule(browser: Any, browser_hub: Any) -> None:
    """`notificationclick` opens only http(s) URLs (a relative one on the hub's origin)."""
    page = await browser.new_page()
    try:
        await page.goto(f"{browser_hub.base_url}/demo")
        await page.add_script_tag(url=SW_PATH)
        got = await page.evaluate(
            "urls => urls.map((u) => NotifyHubPush.clickTarget(u, 'https://hub.example'))",
            ["/inbox/1", "https://shop.example/o/1", "javascript:alert(1)", "data:text/html,x", ""],
        )
        assert got == ["https://hub.example/inbox/1", "https://shop.example/o/1", None, None, None]
        shown = await page.evaluate(
            "p => NotifyHubPush.display(p, 'https://hub.example')",
            {"title": "", "collapse_key": "deploys", "severity": "critical"},
        )
        assert shown == {
            "title": "New notification",
            "options": {
                "body": "",
                "data": {"id": None, "action_url": None},
                "requireInteraction": True,
                "tag": "deploys",
                "renotify": True,
            },
        }
    finally:
        await page.close()


async def test_the_matrix_shows_and_saves_preferences(
    push_context: Any, browser_hub: Any, make_token: Any, publish_key: str
) -> None:
    """Rows: the user's categories and those of the notifications shown; columns: the
    channels the hub answers with. A click PUTs and the row shows what the hub returned."""
    base = browser_hub.base_url
    user = f"matrix-{uuid.uuid4().hex[:8]}"
    token = make_token(user)
    async with httpx.AsyncClient(base_url=base) as client:
        put = await client.put(
            "/v1/me/preferences",
            json={"categories": {"orders": {"inbox": True, "push": False}}},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert put.status_code == 200, put.text
    channels = list(
        put.json()["categories"]["orders"]
    )  # inbox, push (and email, if the hub has it)
    await publish(browser_hub, publish_key, user, title="Invoice 7", category="billing")
    page = await open_demo(push_context, base, token)
    rows = page.locator("[data-testid=matrix-row]")
    await rows.first.wait_for()
    assert await rows.evaluate_all("rs => rs.map((r) => r.dataset.category)") == [
        "billing",
        "orders",
    ]
    headers = await page.locator("[data-testid=matrix] th").all_inner_texts()
    labels = {"inbox": "Inbox", "email": "E-mail", "push": "Push"}
    assert headers == [
        "Category",
        *[labels[c] for c in ("inbox", "email", "push") if c in channels],
    ]

    def box(category: str, channel: str) -> Any:
        return page.locator(f'[data-category="{category}"] input[data-channel="{channel}"]')

    assert not await box("orders", "push").is_checked()
    assert await box("billing", "push").is_checked()  # not set: the default, on
    await box("billing", "push").uncheck()
    await page.locator("[data-testid=matrix]:not([aria-busy])").wait_for()
    saved = (await hub_get(base, token, "/v1/me/preferences"))["categories"]
    assert saved["billing"]["push"] is False and saved["billing"]["inbox"] is True
    assert saved["orders"] == put.json()["categories"]["orders"]
    assert not await box("billing", "push").is_checked()
    await box("orders", "push").check()
    await page.wait_for_function(
        "() => !document.querySelector('[data-testid=matrix]').hasAttribute('aria-busy')"
    )
    saved = (await hub_get(base, token, "/v1/me/preferences"))["categories"]
    assert saved["orders"]["push"] is True and saved["billing"]["push"] is False
    if os.environ.get("NOTIFYHUB_UPDATE_SCREENSHOT"):
        await page.locator("[data-testid=settings]").screenshot(path=str(SCREENSHOT))
    assert page.errors == []
