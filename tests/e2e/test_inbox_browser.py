"""The inbox states of issue 18 in headless Chromium: notifyhub.js's snooze presets and list
rules as pure functions (in several time zones), and the demo's tabs live across browser tabs:
a snooze resurfaces in both, an archive in one leaves the other, and after 50 seeded random
operations every tab's badge matches the list it shows."""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_browser import Tab, open_tab, open_tabs, publish, wait_until

pytestmark = pytest.mark.slow

STATIC = Path(__file__).resolve().parents[2] / "src" / "notifyhub" / "static"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "demo-inbox.png"


# ---- pure functions: snooze presets and list membership, in a browser's own time zone ----

# Each case: a local wall-clock "now" (y, m (1-12), d, h, min), the preset, and the local
# wall-clock end (y, m, d, h, min) with its weekday (0 = Sunday).
PRESET_CASES: dict[str, list[tuple[tuple[int, ...], str, tuple[int, ...], int]]] = {
    # US DST ends on Sunday 2026-11-01 at 02:00 (clocks go back to 01:00).
    "America/New_York": [
        ((2026, 10, 31, 22, 0), "tomorrow", (2026, 11, 1, 9, 0), 0),
        ((2026, 10, 31, 22, 0), "next-week", (2026, 11, 2, 9, 0), 1),
        ((2026, 11, 1, 8, 59), "tomorrow", (2026, 11, 2, 9, 0), 1),
        ((2026, 11, 2, 8, 0), "next-week", (2026, 11, 9, 9, 0), 1),  # a Monday: a week on
        ((2026, 11, 4, 23, 59), "next-week", (2026, 11, 9, 9, 0), 1),
        ((2026, 12, 31, 10, 0), "tomorrow", (2027, 1, 1, 9, 0), 5),
    ],
    # Southern hemisphere: DST starts on Sunday 2026-09-27 at 02:00 (clocks go to 03:00).
    "Pacific/Auckland": [
        ((2026, 9, 26, 23, 30), "tomorrow", (2026, 9, 27, 9, 0), 0),
        ((2026, 9, 27, 0, 15), "next-week", (2026, 9, 28, 9, 0), 1),  # Sunday: tomorrow
    ],
    "Asia/Kolkata": [((2026, 2, 28, 9, 0), "tomorrow", (2026, 3, 1, 9, 0), 0)],
}

PRESETS_IN_PAGE = """(cases) => cases.map(([now, preset]) => {
  const start = new Date(now[0], now[1] - 1, now[2], now[3], now[4]);
  const end = NotifyHub.snoozeTime(preset, start);
  const hour = NotifyHub.snoozeTime("hour", start);
  return {
    local: [end.getFullYear(), end.getMonth() + 1, end.getDate(), end.getHours(), end.getMinutes()],
    weekday: end.getDay(),
    hourMs: hour.getTime() - start.getTime(),
    body: NotifyHub.snoozeBody(preset, start).snoozed_until === end.toISOString(),
  };
})"""


@pytest.fixture
def zone() -> str:
    return "UTC"


@pytest.fixture
async def library_page(browser: Any, zone: str) -> AsyncIterator[Any]:
    """A blank page in the time zone `zone` with notifyhub.js loaded (no hub)."""
    ctx = await browser.new_context(timezone_id=zone)
    page = await ctx.new_page()
    await page.set_content("<!doctype html><title>lib</title>")
    await page.add_script_tag(path=str(STATIC / "notifyhub.js"))
    yield page
    await ctx.close()


@pytest.mark.parametrize("zone", sorted(PRESET_CASES))
async def test_snooze_presets_keep_local_wall_clock_times(library_page: Any, zone: str) -> None:
    cases = PRESET_CASES[zone]
    results = await library_page.evaluate(PRESETS_IN_PAGE, [[now, p] for now, p, _, _ in cases])
    for (now, preset, local, weekday), got in zip(cases, results, strict=True):
        assert (got["local"], got["weekday"]) == ([*local], weekday), (zone, now, preset)
        assert got["hourMs"] == 3_600_000 and got["body"], (zone, now)
    presets = await library_page.evaluate("NotifyHub.SNOOZE_PRESETS.map(p => p.name)")
    assert presets == ["hour", "tomorrow", "next-week"]


async def test_snooze_bodies_and_list_membership(library_page: Any) -> None:
    bodies = await library_page.evaluate(
        """() => {
          const error = (f) => { try { f(); return null; } catch (e) { return e.name; } };
          const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
          return [
            NotifyHub.snoozeBody(90), NotifyHub.snoozeBody(at),
            NotifyHub.snoozeBody("2026-01-02T03:04:05Z"), NotifyHub.snoozeBody("hour", at),
            error(() => NotifyHub.snoozeBody(0)), error(() => NotifyHub.snoozeBody(1.5)),
            error(() => NotifyHub.snoozeBody(null)), error(() => NotifyHub.snoozeTime("later")),
          ];
        }"""
    )
    assert bodies == [
        {"snooze": 90},
        {"snoozed_until": "2026-01-02T03:04:05.000Z"},
        {"snoozed_until": "2026-01-02T03:04:05Z"},
        {"snoozed_until": "2026-01-02T04:04:05.000Z"},
        "RangeError",
        "RangeError",
        "TypeError",
        "RangeError",
    ]
    item = {
        "id": "01J",
        "status": "unread",
        "severity": "warning",
        "category": "billing",
        "tags": ["invoice", "eu"],
        "actor": {"type": "user", "id": "bob"},
        "created_at": "2026-01-02T00:00:00.000Z",
        "archived": False,
        "pinned": False,
        "snoozed_until": None,
    }
    cases: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None, bool]] = [
        ({}, {}, None, True),
        ({}, {"status": "read"}, None, False),
        ({"archived": True}, {}, None, False),
        ({"archived": True}, {"status": "archived"}, None, True),
        ({"snoozed_until": "2026-01-03T00:00:00Z"}, {"status": "unread"}, None, False),
        ({"snoozed_until": "2026-01-03T00:00:00Z"}, {"status": "snoozed"}, None, True),
        ({}, {"status": "snoozed"}, None, False),
        ({}, {"pinned": True}, None, False),
        ({"pinned": True}, {"pinned": True}, None, True),
        ({}, {"pinned": False}, None, True),
        ({"pinned": True}, {"pinned": False}, None, False),
        ({}, {"tagsAny": ["eu", "us"], "tagsAll": ["invoice"]}, None, True),
        ({}, {"tagsAll": ["invoice", "us"]}, None, False),
        ({}, {"severityAtLeast": "error"}, None, False),
        ({}, {"actor": "bob", "category": "billing"}, None, True),
        ({}, {"createdAfter": "2026-01-01T00:00:00Z", "createdBefore": "2026-01-03"}, None, True),
        ({}, {"createdAfter": "2026-01-02T00:00:00.000Z"}, None, False),
        ({}, {"view": "v"}, {"tags_any": ["eu"], "categories": ["billing"]}, True),
        ({}, {"view": "v"}, {"severity_at_least": "warning", "tags_all": ["eu", "x"]}, False),
        ({}, {"view": "v"}, {"categories": ["orders"]}, False),
    ]
    got = await library_page.evaluate(
        "([item, cases]) => cases.map(([change, options, filter]) =>"
        " NotifyHub.matchesList({...item, ...change}, options, filter))",
        [item, [[change, options, view] for change, options, view, _ in cases]],
    )
    assert got == [expected for *_, expected in cases]


# ---- the demo's tabs against a hub ----------------------------------------------------


async def me(hub: Any, token: str, method: str, path: str, **kwargs: Any) -> Any:
    """A REST call as the user; the answer's JSON (None for 204)."""
    async with httpx.AsyncClient(base_url=hub.base_url) as client:
        response = await client.request(
            method, path, headers={"Authorization": f"Bearer {token}"}, **kwargs
        )
    assert response.status_code < 300, response.text
    return None if response.status_code == 204 else response.json()


@pytest.fixture
async def define_view(hub: Any, admin_key: str) -> AsyncIterator[Callable[..., Awaitable[None]]]:
    """Define a tenant view (an admin defines it for every user of tenant "default");
    deleted after the test, so the other tests' users do not get it."""
    defined: list[str] = []
    headers = {"Authorization": f"Bearer {admin_key}"}

    async def define(name: str, **view: Any) -> None:
        response = await hub.client.put(
            f"/v1/admin/views/{name}", params={"tenant": "default"}, json=view, headers=headers
        )
        assert response.status_code in (200, 201), response.text
        defined.append(name)
        await hub.app_state["views"].settled()  # every user's counts recounted

    yield define
    for name in defined:
        await hub.client.delete(f"/v1/admin/views/{name}", headers=headers)
    await hub.app_state["views"].settled()


async def record_events(tab: Tab, watched: str) -> None:
    """Log `notification` and `update` events for one id, and whether its row was shown
    after the demo handled each (the demo's handlers were registered first)."""
    await tab.js(
        """id => {
          window.__log = [];
          const row = `[data-testid=item][data-id="${id}"]`;
          const shown = () => Boolean(document.querySelector(row));
          const log = (...entry) => __log.push([...entry, shown()]);
          const client = notifyhubDemo.client;
          client.on('notification',
            n => n.id === id && log('notification', Boolean(n.resurfaced), n.status));
          client.on('update',
            u => u.id === id && log('update', u.snoozed_until !== null, u.status));
          return true;
        }""",
        watched,
    )


async def row_ids(tab: Tab, testid: str = "list") -> list[str]:
    return list(
        await tab.js(
            "t => [...document.querySelectorAll(`[data-testid=${t}] > [data-testid=item]`)]"
            ".map(row => row.dataset.id)",
            testid,
        )
    )


async def test_a_snooze_resurfaces_live_in_two_tabs(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    token = make_token("sam")
    first = await publish(hub, publish_key, "sam", title="Call the carrier")
    second = await publish(hub, publish_key, "sam", title="Check the dock schedule")
    tabs = await open_tabs(context, browser_hub.base_url, token, mode)
    for tab in tabs:
        assert await row_ids(tab) == [second, first]
        await record_events(tab, first)
    await tabs[0].item(first).locator("[data-action=toggle-read]").click()
    for tab in tabs:
        await tab.page.locator(f'[data-id="{first}"][data-status=read]').wait_for()

    await tabs[0].js("id => notifyhubDemo.client.snooze(id, 2).then(() => true)", first)
    for tab in tabs:  # gone from the list at once (the log says), back on top 2 s later
        await tab.page.wait_for_function(
            "() => __log.some(([e, back]) => e === 'notification' && back)"
        )
        await tab.item(first).wait_for()
        assert await row_ids(tab) == [first, second]
        assert await tab.item(first).get_attribute("data-status") == "unread"
        assert await tab.js("window.__log") == [
            ["update", False, "read", True],  # marked read
            ["update", True, "read", False],  # snoozed: the row left
            ["notification", True, "unread", True],  # resurfaced: unread, shown again
        ]
        await tab.page.locator("[data-testid=badge]").filter(has_text="2").wait_for()

    # The menu: "1 hour" hides it in both tabs; the Snoozed tab lists it and unsnoozes it.
    before = datetime.now(UTC)
    await tabs[1].item(second).locator("[data-action=snooze]").click()
    menu = tabs[1].page.locator("[data-testid=snooze-menu]")
    assert await menu.locator("[data-preset]").evaluate_all(
        "bs => bs.map(b => b.dataset.preset)"
    ) == [
        "hour",
        "tomorrow",
        "next-week",
    ]
    await menu.locator('[data-preset="hour"]').click()
    for tab in tabs:
        await tab.item(second).wait_for(state="detached")
    item = await me(browser_hub, token, "GET", f"/v1/me/notifications/{second}")
    until = datetime.fromisoformat(item["snoozed_until"])
    hour = timedelta(hours=1)
    assert before + hour - timedelta(seconds=1) <= until <= datetime.now(UTC) + hour
    await tabs[1].page.locator('[data-testid=tab][data-tab="snoozed"]').click()
    await tabs[1].item(second).locator("[data-action=unsnooze]").click()
    await tabs[1].item(second).wait_for(state="detached")
    await tabs[0].item(second).wait_for()
    assert [error for tab in tabs for error in tab.errors] == []


async def test_archive_in_one_tab_removes_it_from_the_other(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    token = make_token("ari")
    kept = await publish(hub, publish_key, "ari", title="Kept")
    gone = await publish(hub, publish_key, "ari", title="Archived in tab one")
    tabs = await open_tabs(context, browser_hub.base_url, token, mode)
    await tabs[0].item(gone).locator("[data-action=archive]").click()
    for tab in tabs:
        await tab.item(gone).wait_for(state="detached")
        await tab.page.locator("[data-testid=badge]").filter(has_text="1").wait_for()
    assert [
        i["id"] for i in (await me(browser_hub, token, "GET", "/v1/me/notifications"))["items"]
    ] == [kept]

    await tabs[1].page.locator('[data-testid=tab][data-tab="archived"]').click()
    await tabs[1].item(gone).locator("[data-action=archive]").click()  # "Unarchive" here
    await tabs[1].item(gone).wait_for(state="detached")
    await tabs[0].item(gone).wait_for()
    assert await row_ids(tabs[0]) == [gone, kept]

    await tabs[0].page.locator("[data-testid=archive-all]").click()
    for sent in (kept, gone):
        await tabs[0].item(sent).wait_for(state="detached")
        await tabs[1].item(sent).wait_for()  # tab two shows the Archived tab
    await tabs[0].page.locator("[data-testid=badge]").wait_for(state="hidden")
    assert [error for tab in tabs for error in tab.errors] == []


@pytest.mark.parametrize("mode", ["shared-worker"])
async def test_mark_all_read_in_a_view_tab_reads_only_the_view(
    context: Any,
    mode: str,
    browser_hub: Any,
    hub: Any,
    publish_key: str,
    define_view: Any,
    make_token: Any,
) -> None:
    """In a view's tab "Mark all read" sends the view: the view's copies are read, the
    others stay unread; its button follows the tab's own unread count."""
    token = make_token("vic")
    await define_view("urgent", filter={"severity_at_least": "error"}, label="Urgent")
    urgent = await publish(hub, publish_key, "vic", title="Freezer F-2", severity="error")
    other = await publish(hub, publish_key, "vic", title="Restock A-12")
    tab = await open_tab(context, browser_hub.base_url, token, "?tab=view:urgent")
    await tab.item(urgent).wait_for()
    await tab.page.locator("[data-testid=mark-all]:enabled").click()
    await tab.page.locator(f'[data-id="{urgent}"][data-status=read]').wait_for()
    await tab.page.locator("[data-testid=mark-all]:disabled").wait_for()  # the view's: 0
    listed = (await me(browser_hub, token, "GET", "/v1/me/notifications"))["items"]
    assert {item["id"]: item["status"] for item in listed} == {urgent: "read", other: "unread"}
    await tab.page.locator('[data-testid=tab][data-tab="all"]').click()
    await tab.page.locator("[data-testid=mark-all]:enabled").wait_for()  # the inbox's: 1
    assert tab.errors == []


TAGS = ["billing", "ops", "db", "mention"]
SEVERITIES = ["info", "success", "warning", "error", "critical"]


class RandomInbox:
    """Seeded random operations on one user's inbox over REST; the hub is the oracle."""

    def __init__(self, hub: Any, publish_key: str, token: str, user: str, seed: int) -> None:
        self.hub, self.publish_key, self.token, self.user = hub, publish_key, token, user
        self.random = random.Random(seed)
        self.ids: list[str] = []

    async def step(self) -> str:
        if len(self.ids) < 4 or self.random.random() < 0.3:
            tags = self.random.sample(TAGS, self.random.randint(0, 3))
            severity = self.random.choice(SEVERITIES)
            sent = await publish(
                self.hub, self.publish_key, self.user, tags=tags, severity=severity
            )
            self.ids.append(sent)
            return "publish"
        target = self.random.choice(self.ids)
        name, body = self.random.choice(
            [
                ("read", {"read": True}),
                ("unread", {"read": False}),
                ("seen", {"seen": True}),
                ("archive", {"archived": True}),
                ("unarchive", {"archived": False}),
                ("pin", {"pinned": True}),
                ("unpin", {"pinned": False}),
                ("snooze", {"snooze": self.random.choice([1, 2, 3600])}),
                ("unsnooze", {"snoozed_until": None}),
                ("delete", None),
            ]
        )
        if body is None:
            await me(self.hub, self.token, "DELETE", f"/v1/me/notifications/{target}")
            self.ids.remove(target)
        else:
            await me(self.hub, self.token, "PATCH", f"/v1/me/notifications/{target}", json=body)
        return name

    async def listed(self, **query: Any) -> dict[str, str]:
        """Every copy of one list (id -> read status), following the cursor."""
        found: dict[str, str] = {}
        params: dict[str, Any] = {"limit": 100, **query}
        while True:
            page = await me(self.hub, self.token, "GET", "/v1/me/notifications", params=params)
            found.update({item["id"]: item["status"] for item in page["items"]})
            if page["next_cursor"] is None:
                return found
            params["cursor"] = page["next_cursor"]


SHOWN_TAB = """() => {
  const rows = [...document.querySelectorAll('[data-testid=item]')];
  const tab = document.querySelector('[data-testid=tab][aria-selected=true]');
  const count = tab.querySelector('[data-testid=tab-count]');
  return {
    rows: Object.fromEntries(rows.map(row => [row.dataset.id, row.dataset.status])),
    pinned: [...document.querySelectorAll('[data-testid=pinned-list] > [data-testid=item]')]
      .map(row => row.dataset.id).sort(),
    unread: count ? Number(count.dataset.unread) : null,
    total: count ? Number(count.dataset.total) : null,
    exact: count ? count.dataset.exact === 'true' : null,
  };
}"""


@pytest.mark.parametrize("mode", ["shared-worker"])
async def test_tab_badges_match_their_lists_after_random_operations(
    context: Any,
    mode: str,
    browser_hub: Any,
    hub: Any,
    publish_key: str,
    define_view: Any,
    make_token: Any,
) -> None:
    token = make_token("rio")
    await define_view("urgent", filter={"severity_at_least": "error"}, label="Urgent")
    await me(hub, token, "PUT", "/v1/me/views/money", json={"filter": {"tags_any": ["billing"]}})
    await me(hub, token, "PUT", "/v1/me/views/dbops", json={"filter": {"tags_all": ["ops", "db"]}})
    queries = {
        "all": {"status": "all"},
        "view:urgent": {"status": "all", "view": "urgent"},
        "view:money": {"status": "all", "view": "money"},
        "view:dbops": {"status": "all", "view": "dbops"},
        "archived": {"status": "archived"},
        "snoozed": {"status": "snoozed"},
    }
    tabs = {
        tab: await open_tab(context, browser_hub.base_url, token, f"?tab={tab}") for tab in queries
    }
    inbox = RandomInbox(hub, publish_key, token, "rio", seed=18)
    done = [await inbox.step() for _ in range(50)]
    print(f"\n50 operations: {sorted(set(done))}")

    mismatch: dict[str, Any] = {}

    async def every_tab_matches() -> bool:
        mismatch.clear()
        counts = await me(hub, token, "GET", "/v1/me/notifications/counts")
        for name, tab in tabs.items():
            shown = await tab.js(SHOWN_TAB)
            expected = await inbox.listed(**queries[name])
            unread = sum(status == "unread" for status in shown["rows"].values())
            checks = [shown["rows"] == expected]
            if name == "all" or name.startswith("view:"):  # their badge: their list's counts
                badge = counts if name == "all" else counts["views"][name[5:]]
                checks += [
                    (shown["unread"], shown["total"]) == (unread, len(shown["rows"])),
                    (badge["unread"], badge["total"]) == (unread, len(shown["rows"])),
                    badge.get("exact", True) and shown["exact"],
                ]
                pinned = await inbox.listed(**queries[name], pinned="true")
                checks.append(shown["pinned"] == sorted(pinned))
            if not all(checks):
                mismatch[name] = {"shown": shown, "listed": expected, "counts": counts}
        return not mismatch

    try:
        await wait_until(every_tab_matches, timeout=30)  # short snoozes resurface meanwhile
    except TimeoutError:
        pytest.fail(f"tabs differ from the hub: {mismatch}")
    assert {"publish", "archive", "snooze", "pin", "read", "delete"} <= set(done)
    assert [error for tab in tabs.values() for error in tab.errors] == []


@pytest.mark.parametrize("mode", ["shared-worker"])
async def test_demo_inbox_tabs_screenshot(
    context: Any,
    mode: str,
    browser_hub: Any,
    hub: Any,
    publish_key: str,
    define_view: Any,
    make_token: Any,
) -> None:
    token = make_token("eve")
    await define_view("alarms", filter={"severity_at_least": "error"}, label="Alarms")
    await me(
        hub,
        token,
        "PUT",
        "/v1/me/views/billing",
        json={"filter": {"tags_any": ["billing"]}, "label": "Billing"},
    )
    await me(
        hub,
        token,
        "PUT",
        "/v1/me/views/mentions",
        json={"filter": {"tags_any": ["mention"]}, "label": "Mentions"},
    )
    samples = [
        (
            "info",
            "Invoice 2026-118 paid",
            "Partner ERP settled the November invoice.",
            "finance",
            ["billing"],
        ),
        (
            "warning",
            "Restock location A-12",
            "Stock went to -4 after picking wave 42.",
            "restock",
            [],
        ),
        ("critical", "Freezer F-2 above -15 °C", "Temperature alarm for 6 minutes.", "alarms", []),
        (
            "info",
            "Jun mentioned you",
            "“Can you check the pallet count at dock 2?”",
            "chat",
            ["mention"],
        ),
        (
            "error",
            "Card payment declined",
            "The renewal for the WMS licence failed.",
            "finance",
            ["billing"],
        ),
        (
            "success",
            "Wave 43 picked",
            "All 212 lines of picking wave 43 were confirmed.",
            "waves",
            [],
        ),
        ("info", "Ana mentioned you", "“Shift swap on Friday?”", "chat", ["mention"]),
        (
            "warning",
            "Label printer low on paper",
            "LP-3 at dock 2 has 40 labels left.",
            "devices",
            [],
        ),
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
            tags=tags,
            source="wms",
        )
        for severity, title, body, category, tags in samples
    ]
    await me(hub, token, "PATCH", f"/v1/me/notifications/{ids[2]}", json={"pinned": True})
    await me(
        hub, token, "PATCH", f"/v1/me/notifications/{ids[0]}", json={"pinned": True, "read": True}
    )
    await me(hub, token, "PATCH", f"/v1/me/notifications/{ids[5]}", json={"archived": True})
    await me(hub, token, "PATCH", f"/v1/me/notifications/{ids[1]}", json={"snooze": 3600})
    (tab,) = await open_tabs(context, browser_hub.base_url, token, mode, n=1)
    page = tab.page
    assert await row_ids(tab, "pinned-list") == [ids[2], ids[0]]
    assert sorted(await row_ids(tab)) == sorted([ids[3], ids[4], ids[6], ids[7]])
    labels = await page.locator("[data-testid=tab]").all_text_contents()
    assert labels[0].startswith("All") and labels[-2:] == ["Snoozed", "Archived"]
    counts = await page.locator("[data-testid=tab-count]").evaluate_all(
        "nodes => nodes.map(n => [n.closest('[data-tab]').dataset.tab, n.dataset.unread])"
    )
    assert dict(counts) == {
        "all": "5",
        "view:alarms": "2",
        "view:billing": "1",
        "view:mentions": "2",
    }
    await tab.item(ids[7]).locator("[data-action=snooze]").click()
    await page.locator("[data-testid=snooze-menu]").wait_for()
    await page.set_viewport_size({"width": 1280, "height": 1000})
    await page.wait_for_timeout(1300)  # let the highlight animations finish
    path = SCREENSHOT if os.environ.get("NOTIFYHUB_UPDATE_SCREENSHOT") else None
    shot = await page.screenshot(path=path)
    assert shot.startswith(b"\x89PNG")
    assert tab.errors == []


@pytest.mark.parametrize("mode", ["shared-worker"])
async def test_a_personal_tab_added_in_one_tab_shows_in_the_other_with_its_count(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    token = make_token("pia")
    old = await publish(hub, publish_key, "pia", title="Invoice 7", tags=["billing"])
    unrelated = await publish(hub, publish_key, "pia", title="Unrelated")
    tabs = await open_tabs(context, browser_hub.base_url, token, mode)
    page = tabs[0].page
    await page.locator("[data-testid=add-view]").click()
    await page.locator("[data-testid=view-form] [name=name]").fill("money")
    await page.locator("[data-testid=view-form] [name=tags]").fill("billing, invoice")
    await page.locator("[data-testid=view-form] [type=submit]").click()
    selected = page.locator('[data-testid=tab][data-tab="view:money"][aria-selected=true]')
    await selected.wait_for()
    await tabs[0].item(unrelated).wait_for(state="detached")  # the view's list replaced All's
    await tabs[0].item(old).wait_for()
    assert await row_ids(tabs[0]) == [old]
    views = await me(browser_hub, token, "GET", "/v1/me/views")
    assert {"name": "money", "filter": {"tags_any": ["billing", "invoice"]}}.items() <= next(
        view for view in views["views"] if view["name"] == "money"
    ).items()

    new = await publish(hub, publish_key, "pia", title="Invoice 8", tags=["invoice"])
    await tabs[0].item(new).wait_for()  # live into the shown view
    count = tabs[1].page.locator('[data-tab="view:money"] [data-testid=tab-count]')
    await count.filter(has_text="2").wait_for()  # the other tab learnt the view from counts

    await page.locator("[data-testid=delete-view]").click()
    await page.locator('[data-testid=tab][data-tab="all"][aria-selected=true]').wait_for()
    assert await page.locator('[data-tab="view:money"]').count() == 0
    assert [error for tab in tabs for error in tab.errors] == []
