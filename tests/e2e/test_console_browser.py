"""The operator console (/console) in headless Chromium, against a real hub: log in with an
admin key, find a user and see a notification just sent in their inbox and their live tail,
open its trace and see the user whose preference dropped it, retry a final_failed delivery
and see it sent, create and revoke an API key and see it refused. Screenshots go to docs/
with NOTIFYHUB_UPDATE_SCREENSHOT=1. The page's CSP has no `unsafe-inline`, the browser
reports no error (a CSP violation is one), and the key never appears in a URL."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from notifyhub.settings import Settings
from support.deliveries import define, post, reaching_localhost, wait_status
from support.receiver import Receiver, Reply

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "docs"
READY = "() => document.getElementById('screen').dataset.ready === '1'"
SHOW = "h => { document.getElementById('screen').dataset.ready = ''; location.hash = h }"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return reaching_localhost(settings)


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    ctx = await browser.new_context(viewport={"width": 1360, "height": 900})
    page = await ctx.new_page()
    page.errors = []
    page.urls = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", lambda m: page.errors.append(m.text) if _reported(m) else None)
    page.on("request", lambda request: page.urls.append(request.url))
    yield page
    await ctx.close()


def _reported(message: Any) -> bool:
    """A browser error worth failing on: any but the network log of a refused request (the
    tests provoke 401s and 403s on purpose); a CSP violation is one."""
    return bool(message.type == "error" and "Failed to load resource" not in message.text)


async def shot(page: Any, name: str) -> None:
    await page.wait_for_timeout(200)  # fonts and the last paint
    path = DOCS / name if os.environ.get("NOTIFYHUB_UPDATE_SCREENSHOT") else None
    assert (await page.screenshot(path=path)).startswith(b"\x89PNG")


async def screen(page: Any, hash_: str) -> None:
    """Show a screen and wait until it has loaded."""
    await page.evaluate(SHOW, hash_)
    await page.wait_for_function(READY)


async def test_the_login_page_shows_only_the_login(page: Any, browser_hub: Any) -> None:
    """Before a key is given, the navigation and the screens stay hidden (the `hidden`
    attribute wins over the layout's `display: flex`)."""
    await page.goto(f"{browser_hub.base_url}/console")
    await page.locator("#login-form").wait_for(state="visible")
    assert await page.locator("#nav").is_hidden()
    assert await page.locator("#app").is_hidden()
    assert await page.evaluate("getComputedStyle(document.getElementById('app')).display") == (
        "none"
    )
    assert page.errors == []


async def test_console_login_user_trace_delivery_and_keys(
    page: Any,
    browser_hub: Any,
    admin_key: str,
    publish_key: str,
    make_token: Any,
    receiver: Receiver,
) -> None:
    run = secrets.token_hex(3)
    dan, cara, group = f"dan-{run}", f"cara-{run}", f"ops-{run}"
    admin = {"Authorization": f"Bearer {admin_key}"}
    async with httpx.AsyncClient(base_url=browser_hub.base_url, timeout=10) as api:
        console = await api.get("/console")
        csp = console.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        # cara drops the `promo` category; both are in one group
        prefs = {"categories": {"promo": {"inbox": False, "push": False}}}
        cara_token = {"Authorization": f"Bearer {make_token(cara)}"}
        assert (await api.put("/v1/me/preferences", json=prefs, headers=cara_token)).is_success
        assert (await api.put(f"/v1/admin/groups/{group}", headers=admin)).is_success
        members = {"add": [dan, cara]}
        changed = await api.post(f"/v1/admin/groups/{group}/members", json=members, headers=admin)
        assert changed.is_success
        # a delivery that fails once, for good (no retries), then would succeed
        receiver.plan("/flaky", Reply(status=500))
        definition = f"console-{run}"
        await define(api, admin_key, definition, url=receiver.url("/flaky"), max_retries=0)
        failed = await post(api, publish_key, definition, {"order": 42})
        await wait_status(api, publish_key, failed, "final_failed")

        # log in
        await page.goto(f"{browser_hub.base_url}/console")
        await page.fill("#key", "nh_not_a_key")
        await page.click("#login-form button")
        await page.locator("#login-error").filter(has_text="refused").wait_for()
        await page.fill("#key", admin_key)
        await page.click("#login-form button")
        await page.wait_for_function(READY)
        assert await page.evaluate("sessionStorage.getItem('notifyhub.console.key')") == admin_key
        await (
            page.locator("[data-tile=streams]")
            .filter(has_text="1")
            .or_(page.locator("[data-tile=streams]").filter(has_text="0"))
            .first.wait_for()
        )

        # a user: the inbox as they see it, and a live tail
        await screen(page, f"#/users?user={dan}")
        await page.locator("#tail-state").filter(has_text="live").wait_for()
        body = {
            "recipients": {"groups": [group]},
            "title": "Spring promo starts",
            "category": "promo",
        }
        sent = await api.post("/v1/notifications", json=body, headers=admin)
        assert sent.status_code == 202
        nid = sent.json()["id"]
        await page.locator("#tail li[data-event=notification]").filter(has_text=nid).wait_for()
        await page.click("form.row button")  # look the user up again: the inbox has it
        await page.wait_for_function(READY)
        await page.locator("#user-inbox").filter(has_text="Spring promo starts").wait_for()
        await page.locator("#tail-state").filter(has_text="live").wait_for()
        await shot(page, "console-user.png")

        # its trace: dan got it, cara's preference dropped it
        await page.locator(f"#user-inbox a:text('{nid}')").click()
        await page.wait_for_function("() => location.hash.startsWith('#/trace')")
        await page.wait_for_function(READY)
        await screen(page, f"#/trace?id={nid}")
        cara_line = page.locator("#trace-lines tr").filter(has_text=cara)
        await cara_line.filter(has_text="dropped_by_preference").wait_for()
        dan_line = page.locator("#trace-lines tr").filter(has_text=dan)
        assert "delivered" in await dan_line.text_content()
        # reached through the group; the live tail above was a stream that was sent it
        assert await dan_line.locator("[data-source]").text_content() == f"group:{group}"
        assert await dan_line.locator("[data-streamed]").text_content() == "1"
        await shot(page, "console-trace.png")
        # a screen asked for while another still loads: the first never lands in the page
        stale = f"user={dan}"
        async with page.expect_request(lambda r: "/trace?" in r.url and stale in r.url):
            await page.evaluate(SHOW, f"#/trace?id={nid}&user={dan}")
        async with page.expect_response(lambda r: stale in r.url) as reply:
            await page.evaluate(SHOW, f"#/trace?id={nid}")
        await (await reply.value).finished()
        await page.wait_for_function(READY)
        await page.wait_for_timeout(200)  # the stale render's last step, had it one to take
        assert await page.locator("#trace-lines").count() == 1
        assert await page.locator("#trace-lines tr").filter(has_text=cara).count() == 1

        # the failed delivery, retried from the console
        await screen(page, f"#/deliveries?id={failed}")
        await page.locator("#delivery-detail .badge").filter(has_text="final_failed").wait_for()
        await page.click("#delivery-retry")
        await wait_status(api, publish_key, failed, "sent")
        await screen(page, "#/deliveries")
        await screen(page, f"#/deliveries?id={failed}")
        await page.locator("#delivery-detail .badge").filter(has_text="sent").wait_for()
        assert len(receiver.received) == 2

        # an API key: created (secret shown once), accepted, revoked, refused
        await screen(page, "#/keys")
        key_name = f"console-key-{run}"
        await page.fill("input[name=key-name]", key_name)
        await page.select_option("select[name=scope]", "publish")
        await page.click("#screen form.card button[type=submit]")
        secret = await page.locator("#key-secret").text_content()
        assert secret and secret.startswith("nh_")
        made = {"Authorization": f"Bearer {secret}"}
        hello = {"recipients": {"users": [dan]}, "title": "from the new key"}
        assert (await api.post("/v1/notifications", json=hello, headers=made)).status_code == 202
        await page.locator(f"tr[data-key={key_name}] button").click()
        await page.locator(f"tr[data-key={key_name}] button").wait_for(state="detached")
        refused = await api.post("/v1/notifications", json=hello, headers=made)
        assert refused.status_code == 401  # this process forgets a revoked key at once

        # the broadcast composer: the count before sending
        await screen(page, "#/broadcast")
        await page.fill("input[name=groups]", group)
        await page.fill("input[name=title]", "Dock 3 closes at noon")
        await page.click("#screen form.card button[type=submit]")
        await page.locator("#broadcast-count").filter(has_text="Reaches 2 user(s)").wait_for()
        await page.click("#broadcast-send")
        await page.locator("#broadcast-sent").wait_for()

        # a rule's templates against sample data
        await screen(page, "#/rules")
        rule = {
            "target_type": "post",
            "recipients": [{"relationship": "author", "title": "{{ actor.id }} commented"}],
        }
        await page.fill("input[name=name]", f"rule-{run}")
        await page.fill("textarea[name=body]", json.dumps(rule))
        await page.fill("input[name=actor]", "zoe")
        await page.click("#rule-preview >> xpath=preceding-sibling::div[1]//button")
        await page.locator("#rule-preview").filter(has_text="zoe commented").wait_for()
        listed = await api.get(f"/v1/admin/rules/rule-{run}", headers=admin)
        assert listed.status_code == 404  # a preview stores nothing

        # the overview while dan's stream is open and notifications arrive
        await screen(page, "#/overview")
        dan_token = {"Authorization": f"Bearer {make_token(dan)}"}
        async with api.stream("GET", "/v1/me/stream", headers=dan_token) as stream:
            assert stream.status_code == 200
            for n in range(12):  # over two scrapes: the rates and the p99 tile fill in
                hi = {"recipients": {"groups": [group]}, "title": f"Wave {n} picked"}
                assert (await api.post("/v1/notifications", json=hi, headers=admin)).is_success
                await asyncio.sleep(0.25)
            await page.locator("[data-tile=streams]").filter(has_text="1").wait_for()
            await page.locator("[data-tile=p99]").filter(has_text="ms").wait_for()
            await shot(page, "console-overview.png")

    assert admin_key not in " ".join(page.urls)
    assert secret not in " ".join(page.urls)
    assert page.errors == []


async def test_a_tenant_bound_console_sees_only_its_tenant(
    page: Any, browser_hub: Any, create_key: Any
) -> None:
    tenant = f"t{secrets.token_hex(3)}"
    bound = await create_key("console-bound", "admin", tenant)
    await page.goto(f"{browser_hub.base_url}/console")
    await page.fill("#key", bound)
    await page.click("#login-form button")
    await page.wait_for_function(READY)
    await screen(page, "#/users?user=alice")  # tenant `default`: not this key's
    await page.locator("#screen .error").filter(has_text="403").wait_for()
    await page.fill("#tenant", tenant)
    await page.dispatch_event("#tenant", "change")
    await page.wait_for_function(READY)
    await page.locator("#user-summary").filter(has_text=tenant).wait_for()
    await page.locator("#user-quiet").filter(has_text="Quiet hours: none").wait_for()
    quiet = {"time_zone": "Europe/Berlin", "quiet": {"mon-sun": ["22:00", "07:00"]}}
    async with httpx.AsyncClient(base_url=browser_hub.base_url, timeout=10) as api:
        answer = await api.put(
            f"/v1/admin/users/{tenant}/alice",
            json=quiet,
            headers={"Authorization": f"Bearer {bound}"},
        )
        assert answer.status_code == 201, answer.text
    await page.click("form.row button")  # look alice up again: her quiet hours show
    await page.wait_for_function(READY)
    shown = page.locator("#user-quiet").filter(has_text="their own, Europe/Berlin")
    await shown.filter(has_text="mon-sun 22:00-07:00").wait_for()
    assert page.errors == []


async def test_the_user_screen_lists_and_cancels_pending_escalations(
    page: Any, browser_hub: Any, create_key: Any
) -> None:
    """Issue 41: an operator sees a user's pending escalation steps and cancels one."""
    tenant = f"t{secrets.token_hex(3)}"
    admin = await create_key("console-esc", "admin", tenant)
    publish = await create_key("console-esc-p", "publish", tenant)
    steps = [
        {"after_s": 600, "unless": "seen", "channel": "push"},
        {"after_s": 3600, "unless": "read", "channel": "email"},
    ]
    body = {"tenant": tenant, "recipients": {"users": ["esme"]}, "title": "Freezer 2"}
    async with httpx.AsyncClient(base_url=browser_hub.base_url) as client:
        response = await client.post(
            "/v1/notifications",
            json={**body, "escalate": steps},
            headers={"Authorization": f"Bearer {publish}"},
        )
        assert response.status_code == 202, response.text
    await page.goto(f"{browser_hub.base_url}/console")
    await page.fill("#key", admin)
    await page.click("#login-form button")
    await page.wait_for_function(READY)
    # Set without focusing the field: a focused one would fire `change` again when the
    # click below blurs it, re-rendering the screen under the click.
    await page.evaluate(
        "t => { const e = document.getElementById('tenant'); e.value = t;"
        " e.dispatchEvent(new Event('change')); }",
        tenant,
    )
    await screen(page, "#/users?user=esme")
    rows = page.locator("#user-escalations tr[data-escalation]")
    await rows.first.wait_for()
    assert await rows.count() == 2
    await rows.first.locator("button").click()
    await page.wait_for_function(
        "() => document.querySelectorAll('#user-escalations tr[data-escalation]').length === 1"
    )
    async with httpx.AsyncClient(base_url=browser_hub.base_url) as client:
        left = await client.get(
            f"/v1/admin/users/{tenant}/esme/escalations",
            headers={"Authorization": f"Bearer {admin}"},
        )
    assert [s["channel"] for s in left.json()["items"]] == ["email"]
    assert page.errors == []


async def test_revoke_on_a_tenants_key_revokes_that_key_not_the_hub_wide_one_of_its_name(
    page: Any, browser_hub: Any, admin_key: str
) -> None:
    """Names are unique per tenant: a hub-wide key and tenant keys may share one. The
    Revoke button of a tenant's row revoked the hub-wide key of that name (its DELETE named
    no tenant), and with no hub-wide one but two tenants' keys answered 409."""
    name, tenant, other = f"dup-{secrets.token_hex(3)}", f"t{secrets.token_hex(3)}", "tother"
    admin = {"Authorization": f"Bearer {admin_key}"}
    async with httpx.AsyncClient(base_url=browser_hub.base_url, timeout=10) as api:
        for bound in (None, tenant, other):
            made = {"name": name, "scope": "publish", "tenant": bound}
            answer = await api.post("/v1/admin/api-keys", json=made, headers=admin)
            assert answer.status_code == 201, answer.text
        await page.goto(f"{browser_hub.base_url}/console")
        await page.fill("#key", admin_key)
        await page.click("#login-form button")
        await page.wait_for_function(READY)
        await screen(page, "#/keys")
        for bound in (tenant, other):
            row = page.locator(f"tr[data-key={name}]").filter(has_text=bound)
            await row.locator("button").click()
            await row.locator("button").wait_for(state="detached")
        listed = (await api.get("/v1/admin/api-keys", headers=admin)).json()["keys"]
    revoked = {k["tenant"]: k["revoked_at"] is not None for k in listed if k["name"] == name}
    assert revoked == {None: False, tenant: True, other: True}
    assert page.errors == []
