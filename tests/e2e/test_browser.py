"""notifyhub.js and the demo inbox in headless Chromium: one stream per browser and user,
cross-tab consistency, one toast per notification, resume after a network cut, token renewal,
and the same scenarios per tab where SharedWorker is missing."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from notifyhub.settings import Settings, StreamSettings

pytestmark = pytest.mark.slow

READY = "() => window.notifyhubDemo?.ready && notifyhubDemo.client.status === 'open'"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "demo.png"


class Tab:
    """One page of the demo inbox, with the page errors it raised."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def item(self, notification_id: str) -> Any:
        return self.page.locator(f'[data-testid=item][data-id="{notification_id}"]')

    async def js(self, expression: str, arg: Any = None) -> Any:
        return await self.page.evaluate(expression, arg)

    async def toasts(self) -> list[str]:
        return list(await self.js("notifyhubDemo.toasts"))

    async def set_hidden(self, hidden: bool) -> None:
        await self.js(
            "h => { window.__nhHidden = h; document.dispatchEvent(new Event('visibilitychange')) }",
            hidden,
        )

    async def record_notifications(self) -> None:
        """Log every `notification` event: its id, and when it arrived (epoch ms)."""
        await self.js(
            "window.__seen = []; window.__arrived = {}; notifyhubDemo.client.on('notification',"
            " n => { __seen.push(n.id); __arrived[n.id] = Date.now(); }); true"
        )  # ends with `true`, not the unsubscribe function: Playwright would call that

    async def arrived_ms(self, notification_id: str) -> float:
        return float(await self.js("id => __arrived[id]", notification_id))

    async def seen(self) -> list[str]:
        return list(await self.js("window.__seen"))


async def open_tab(context: Any, base_url: str, token: str, query: str = "") -> Tab:
    tab = Tab(await context.new_page())
    await tab.page.goto(f"{base_url}/demo{query}#token={token}")
    await tab.page.wait_for_function(READY, timeout=15_000)
    return tab


async def open_tabs(context: Any, base_url: str, token: str, mode: str, n: int = 2) -> list[Tab]:
    tabs = [await open_tab(context, base_url, token) for _ in range(n)]
    for tab in tabs:
        assert await tab.js("notifyhubDemo.client.mode") == mode
    return tabs


async def wait_until(check: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.05)


async def metric(base_url: str, name: str, **labels: str) -> float:
    """The sum of the hub's samples of `name` whose labels include `labels`."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{base_url}/metrics")).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


async def publish(hub: Any, key: str, user: str, **fields: Any) -> str:
    body = {"recipients": {"users": [user]}, "title": fields.pop("title", "hello"), **fields}
    async with httpx.AsyncClient(base_url=hub.base_url) as client:
        response = await client.post(
            "/v1/notifications", json=body, headers={"Authorization": f"Bearer {key}"}
        )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def peers_see(tabs: list[Tab], mode: str) -> None:
    """Per-tab mode: wait until every tab knows every other tab's current visibility."""
    if mode != "tab":
        return
    expected = sorted([await t.js("!document.hidden") for t in tabs])

    async def agreed() -> bool:
        for tab in tabs:
            views = await tab.js(
                "[!document.hidden, ...[...notifyhubDemo.client._transport._peers.values()]"
                ".map(p => p.visible)]"
            )
            if sorted(views) != expected:
                return False
        return True

    await wait_until(agreed)


async def all_toasts(tabs: list[Tab]) -> list[str]:
    return [toast for tab in tabs for toast in await tab.toasts()]


async def test_two_tabs_share_the_stream_and_stay_consistent(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    tabs = await open_tabs(context, browser_hub.base_url, make_token("ana"), mode)
    expected_streams = 1 if mode == "shared-worker" else 2
    assert await metric(browser_hub.base_url, "notifyhub_streams_open") == expected_streams
    assert (
        await metric(
            browser_hub.base_url, "notifyhub_http_requests_total", route="/v1/me/stream-tokens"
        )
        == expected_streams
    )
    await peers_see(tabs, mode)
    for tab in tabs:
        await tab.record_notifications()

    posted_ms = time.time() * 1000
    sent = await publish(hub, publish_key, "ana", title="Restock A-12", severity="warning")
    for tab in tabs:
        await tab.item(sent).wait_for()
    latency_ms = max([await tab.arrived_ms(sent) for tab in tabs]) - posted_ms
    print(f"\n[{mode}] POST sent -> event in both tabs: {latency_ms:.0f} ms")
    assert await all_toasts(tabs) == [sent]
    assert (
        await tabs[0].page.locator(f'[data-testid=toast][data-id="{sent}"]').count()
        + (await tabs[1].page.locator(f'[data-testid=toast][data-id="{sent}"]').count())
        == 1
    )

    badge = tabs[1].page.locator("[data-testid=badge]")
    await badge.wait_for()
    assert await badge.text_content() == "1"
    await tabs[0].item(sent).locator("[data-action=toggle-read]").click()
    await badge.wait_for(state="hidden")
    assert await tabs[1].item(sent).get_attribute("data-status") == "read"

    await tabs[1].page.locator('[data-filter="unread"]').click()
    await tabs[1].item(sent).wait_for(state="detached")
    await tabs[0].item(sent).locator("[data-action=toggle-read]").click()  # unread again
    await tabs[1].item(sent).wait_for()
    assert await badge.text_content() == "1"

    await tabs[1].item(sent).locator("[data-action=delete]").click()
    await tabs[0].item(sent).wait_for(state="detached")
    assert await metric(browser_hub.base_url, "notifyhub_streams_open") == expected_streams
    assert [error for tab in tabs for error in tab.errors] == []


async def test_toasts_only_in_a_visible_tab(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    first, second = tabs = await open_tabs(context, browser_hub.base_url, make_token("bo"), mode)
    await second.set_hidden(True)
    await peers_see(tabs, mode)
    one = await publish(hub, publish_key, "bo", title="first tab only")
    for tab in tabs:
        await tab.item(one).wait_for()
    assert (await first.toasts(), await second.toasts()) == ([one], [])

    await first.set_hidden(True)
    await peers_see(tabs, mode)
    quiet = await publish(hub, publish_key, "bo", title="nobody is looking")
    for tab in tabs:
        await tab.item(quiet).wait_for()
    assert await all_toasts(tabs) == [one]

    await second.set_hidden(False)
    await peers_see(tabs, mode)
    inbox_only = await publish(hub, publish_key, "bo", title="inbox only", display="inbox")
    two = await publish(hub, publish_key, "bo", title="second tab")
    for tab in tabs:
        await tab.item(two).wait_for()
        await tab.item(inbox_only).wait_for()
    assert (await first.toasts(), await second.toasts()) == ([one], [two])


async def test_resume_after_a_network_cut_without_duplicates(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    tabs = await open_tabs(context, browser_hub.base_url, make_token("cy"), mode)
    for tab in tabs:
        await tab.record_notifications()
        await tab.js("window.__resets = 0; notifyhubDemo.client.on('reset', () => __resets++); 1")
    await peers_see(tabs, mode)
    before = await publish(hub, publish_key, "cy", title="before the cut")
    for tab in tabs:
        await tab.item(before).wait_for()

    await browser_hub.stop()
    for tab in tabs:
        await tab.page.wait_for_function("() => notifyhubDemo.client.status !== 'open'")
    missed = [
        await publish(hub, publish_key, "cy", title=f"while offline {n}", severity=severity)
        for n, severity in enumerate(["info", "error", "critical"])
    ]
    await browser_hub.start()
    for tab in tabs:
        await tab.page.wait_for_function(READY, timeout=30_000)
        for sent in missed:
            await tab.item(sent).wait_for()

    for tab in tabs:
        assert await tab.js("window.__resets") == 0  # resumed, not reloaded
        assert await tab.seen() == [before, *missed]
        assert await tab.page.locator("[data-testid=item]").count() == 4
        assert await tab.page.locator("[data-testid=badge]").text_content() == "4"
    assert sorted(await all_toasts(tabs)) == sorted([before, *missed])
    assert await metric(browser_hub.base_url, "notifyhub_streams_open") == (
        1 if mode == "shared-worker" else 2
    )


async def test_expired_stream_token_is_renewed_through_the_callback(
    context: Any,
    mode: str,
    settings: Settings,
    start_browser_hub: Any,
    hub: Any,
    publish_key: str,
    make_token: Any,
) -> None:
    short = settings.model_copy(update={"stream": StreamSettings(token_ttl_s=5)})
    browser_hub = await start_browser_hub(short)
    tabs = await open_tabs(context, browser_hub.base_url, make_token("dee"), mode)
    first_tokens = [token for tab in tabs for token in await tab.js("notifyhubDemo.streamTokens")]
    assert len(first_tokens) == (1 if mode == "shared-worker" else 2)

    await asyncio.sleep(short.stream.token_ttl_s + 1.5)  # let the stream tokens expire
    async with httpx.AsyncClient() as client:
        url = f"{browser_hub.base_url}/v1/me/stream?access_token={first_tokens[0]}"
        assert (await client.get(url)).status_code == 401
    await browser_hub.restart()

    for tab in tabs:
        await tab.page.wait_for_function(READY, timeout=30_000)
    renewed = [token for tab in tabs for token in await tab.js("notifyhubDemo.streamTokens")]
    assert len(renewed) >= 2 * len(first_tokens) and not set(renewed[-1:]) & set(first_tokens)
    sent = await publish(hub, publish_key, "dee", title="after renewal")
    for tab in tabs:
        await tab.item(sent).wait_for()


async def test_reset_after_a_gap_older_than_the_change_log_reloads_the_list(
    context: Any,
    mode: str,
    settings: Settings,
    start_browser_hub: Any,
    publish_key: str,
    make_token: Any,
) -> None:
    small = settings.model_copy(
        update={"limits": settings.limits.model_copy(update={"change_log_max": 10})}
    )
    browser_hub, publisher = await start_browser_hub(small), await start_browser_hub(small)
    tabs = await open_tabs(context, browser_hub.base_url, make_token("fay"), mode)
    for tab in tabs:
        await tab.record_notifications()
        await tab.js("window.__resets = 0; notifyhubDemo.client.on('reset', () => __resets++); 1")
    before = await publish(publisher, publish_key, "fay", title="before the gap")
    for tab in tabs:
        await tab.item(before).wait_for()

    await browser_hub.stop()
    missed = [await publish(publisher, publish_key, "fay", title=f"gap {n}") for n in range(12)]
    await browser_hub.start()
    for tab in tabs:
        for sent in missed[-10:]:
            await tab.item(sent).wait_for()
        assert await tab.js("window.__resets") == 1
        assert await tab.seen() == [before]  # the rest came by reloading the list
        assert await tab.page.locator("[data-testid=badge]").text_content() == "13"


HOST_PAGE = """<!doctype html><meta charset="utf-8"><title>host</title>
<script src="/static/notifyhub.js"></script>
<script>
  const jwt = new URLSearchParams(location.hash.slice(1)).get("token");
  sessionStorage.loads = String(Number(sessionStorage.loads || 0) + 1);
  window.hub = NotifyHub.connect({
    user: "host-page",
    getAccessToken: () => jwt,
    getStreamToken: async () => {
      const r = await fetch("/v1/me/stream-tokens", {
        method: "POST", headers: {Authorization: `Bearer ${jwt}`},
      });
      return (await r.json()).token;
    },
  });
  window.events = [];
  for (const name of ["notification", "update", "delete", "counts"]) {
    hub.on(name, (data) => events.push([name, data]));
  }
</script>"""


async def test_a_host_page_uses_the_library_and_reloads_on_reset(
    context: Any,
    mode: str,
    settings: Settings,
    start_browser_hub: Any,
    publish_key: str,
    make_token: Any,
) -> None:
    """Without a `reset` listener the library reloads the page; the REST helpers work."""
    small = settings.model_copy(
        update={"limits": settings.limits.model_copy(update={"change_log_max": 10})}
    )
    browser_hub, publisher = await start_browser_hub(small), await start_browser_hub(small)
    await context.route(
        f"{browser_hub.base_url}/host.html",
        lambda route: route.fulfill(body=HOST_PAGE, content_type="text/html"),
    )
    page = await context.new_page()
    await page.goto(f"{browser_hub.base_url}/host.html#token={make_token('hal')}")
    await page.wait_for_function("() => window.hub?.status === 'open'")
    assert await page.evaluate("hub.mode") == mode

    sent = await publish(publisher, publish_key, "hal", title="via the library")
    await page.wait_for_function("() => hub.counts?.unread === 1")
    listed = await page.evaluate("async () => (await hub.list({status: 'unread'})).items")
    assert [item["id"] for item in listed] == [sent]
    await page.evaluate("async id => { await hub.markRead(id); await hub.markUnread(id); }", sent)
    assert await page.evaluate("async () => (await hub.markAllRead()).updated") == 1
    await page.wait_for_function("() => hub.counts.unread === 0")
    kinds = await page.evaluate("events.map(([name]) => name)")
    assert kinds.count("update") == 3 and "notification" in kinds

    await browser_hub.stop()
    for n in range(12):
        await publish(publisher, publish_key, "hal", title=f"gap {n}")
    await browser_hub.start()
    await page.wait_for_function("() => sessionStorage.loads === '2'", timeout=30_000)
    await page.wait_for_function("() => window.hub?.status === 'open'")
    assert await page.evaluate("async () => (await hub.fetchCounts()).unread") == 12
    await page.evaluate("async id => hub.delete(id)", sent)
    await page.wait_for_function("() => hub.counts?.total === 12")


@pytest.mark.parametrize("mode", ["shared-worker"])
async def test_a_worker_that_fails_to_load_falls_back_to_a_stream_per_tab(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    await context.route("**/notifyhub-worker.js", lambda route: route.fulfill(status=404))
    tab = await open_tab(context, browser_hub.base_url, make_token("gus"))
    await tab.page.wait_for_function("() => notifyhubDemo.client.mode === 'tab'")
    sent = await publish(hub, publish_key, "gus", title="still live")
    await tab.item(sent).wait_for()
    assert await tab.toasts() == [sent]


@pytest.mark.parametrize("mode", ["shared-worker"])
async def test_a_worker_that_never_answers_falls_back_to_a_stream_per_tab(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    """The worker's script is held (never served, no `error` event): the tab gives up on
    the worker after WORKER_ANSWER_MS (5 s) without an answer and opens its own stream."""
    held: list[Any] = []
    await context.route("**/notifyhub-worker.js", lambda route: held.append(route))
    tab = await open_tab(context, browser_hub.base_url, make_token("hal"))
    assert held, "the worker's script was asked for"
    await tab.page.wait_for_function("() => notifyhubDemo.client.mode === 'tab'")
    sent = await publish(hub, publish_key, "hal", title="still live")
    await tab.item(sent).wait_for()


@pytest.mark.parametrize("mode", ["shared-worker"])
async def test_demo_inbox_pages_marks_and_screenshots(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    samples = [
        (
            "info",
            "Weekly report is ready",
            "Your warehouse summary for week 47 is available.",
            "reports",
        ),
        ("success", "Wave 42 picked", "All 318 lines of picking wave 42 were confirmed.", "waves"),
        ("warning", "Restock location A-12", "Stock went to -4 after picking wave 42.", "restock"),
        ("error", "Label printer offline", "Printer LP-3 at dock 2 stopped answering.", "devices"),
        ("critical", "Freezer F-2 above -15 °C", "Temperature alarm for 6 minutes.", "alarms"),
        ("info", "New teammate", "Jun joined the replenisher-wh1 role.", "people"),
        ("success", "Delivery confirmed", "Order 88213 was signed for at 09:42.", "orders"),
        ("warning", "Slow picking on aisle 7", "Average pick time is 2x the baseline.", "waves"),
        ("error", "Webhook failing", "partner-erp answered 503 three times.", "integrations"),
        ("critical", "Fire door D-4 open", "The door has been open for 3 minutes.", "alarms"),
        ("info", "Maintenance tonight", "The WMS is read-only from 02:00 to 02:30.", "system"),
    ]
    ids = [
        await publish(
            hub,
            publish_key,
            "eve",
            title=title,
            body=body,
            severity=severity,
            category=category,
            source="wms",
            action_url="https://wms.example/items",
        )
        for severity, title, body, category in samples
    ]
    token = make_token("eve")
    async with httpx.AsyncClient(base_url=browser_hub.base_url) as client:
        for done in ids[:4]:
            await client.patch(
                f"/v1/me/notifications/{done}",
                json={"read": True},
                headers={"Authorization": f"Bearer {token}"},
            )
    (tab,) = await open_tabs(context, browser_hub.base_url, token, mode, n=1)
    page = tab.page
    assert await page.locator("[data-testid=item]").count() == 10
    assert await page.locator("[data-testid=badge]").text_content() == "7"
    live = await publish(
        hub,
        publish_key,
        "eve",
        title="Dock 3 door open",
        severity="warning",
        body="Trailer TR-118 is waiting at dock 3.",
        category="docks",
        source="yard",
    )
    await page.locator(f'[data-testid=toast][data-id="{live}"]').wait_for()
    await tab.item(live).wait_for()
    await page.locator("[data-testid=badge]").filter(has_text="8").wait_for()
    await page.set_viewport_size({"width": 1280, "height": 1360})
    await page.wait_for_timeout(1300)  # let the slide-in and highlight animations finish
    path = SCREENSHOT if os.environ.get("NOTIFYHUB_UPDATE_SCREENSHOT") else None
    shot = await page.screenshot(path=path)
    assert shot.startswith(b"\x89PNG")

    await page.locator("[data-testid=more]").click()
    await tab.item(ids[0]).wait_for()
    assert await page.locator("[data-testid=item]").count() == 12
    await page.locator("[data-testid=more]").wait_for(state="hidden")

    await page.locator('[data-filter="unread"]').click()
    await tab.item(ids[0]).wait_for(state="detached")
    assert await page.locator("[data-testid=item]").count() == 8
    await tab.item(ids[-1]).locator("[data-action=toggle-read]").click()
    await tab.item(ids[-1]).wait_for(state="detached")
    await page.locator("[data-testid=badge]").filter(has_text="7").wait_for()
    await page.locator('[data-filter="all"]').click()
    await tab.item(ids[-1]).locator("[data-action=toggle-read]").click()  # unread again
    await page.locator("[data-testid=badge]").filter(has_text="8").wait_for()

    await page.locator("[data-testid=mark-all]").click()
    await page.locator("[data-testid=badge]").wait_for(state="hidden")
    await tab.item(ids[5]).locator("[data-action=delete]").click()
    await tab.item(ids[5]).wait_for(state="detached")
    # The row leaves at once; the summary follows the stream's counts event after it.
    summary = page.locator("[data-testid=summary]")
    await summary.filter(has_text="0 unread · 11 notifications").wait_for()
    assert await summary.text_content() == "0 unread · 11 notifications"
    assert tab.errors == []


async def test_no_toast_in_quiet_hours_the_inbox_still_shows_it(
    context: Any,
    mode: str,
    browser_hub: Any,
    hub: Any,
    publish_key: str,
    admin_key: str,
    make_token: Any,
) -> None:
    always = {"quiet": {"mon-sun": ["00:00", "24:00"]}}  # quiet around the clock
    async with httpx.AsyncClient(base_url=hub.base_url) as client:
        response = await client.put(
            "/v1/admin/users/default/quinn",
            json=always,
            headers={"Authorization": f"Bearer {admin_key}"},
        )
    assert response.status_code in (200, 201), response.text
    [tab] = await open_tabs(context, browser_hub.base_url, make_token("quinn"), mode, n=1)
    warm = await publish(hub, publish_key, "quinn", title="after the stream opened")
    await tab.item(warm).wait_for()  # (the stream's quiet hours are read by now)
    sent = await publish(hub, publish_key, "quinn", title="in quiet hours")
    await tab.item(sent).wait_for()
    assert sent not in await tab.toasts()
    assert tab.errors == []
