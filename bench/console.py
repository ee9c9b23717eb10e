"""The operator console's screens in headless Chromium, against a hub holding 10k users and
1M notifications: each screen loaded fresh (a new page, the key already in its tab), timed
from navigation start to the screen's data shown (`performance.now()` when console.js marks
the screen ready: every call it makes has answered and the page is built)."""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from bench import scenarios
from bench.clients import make_group, member_names
from bench.report import Skipped

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

CHROMIUM = os.environ.get("NOTIFYHUB_TEST_CHROMIUM", "/usr/bin/chromium")
USERS = 10_000
PER_USER = 100
"""10k users x 100 notifications each = 1M notifications stored."""
LOADS = 10
"""Fresh loads per screen."""
READY = "() => document.getElementById('screen')?.dataset.ready === '1'"
ELAPSED = "() => Number(document.getElementById('screen').dataset.readyMs)"


async def _fill(hub: BenchHub, group: str) -> str:
    """Fan-outs to the group (USERS users) until each holds PER_USER: 1M copies stored
    (a repeat of the scenario adds none); the last id."""
    headers = {"Authorization": f"Bearer {hub.admin_key}"}
    last = ""
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=120) as client:
        user = member_names(group, USERS)[0]
        found = await client.get(f"/v1/admin/users/default/{user}")
        held = found.json()["counts"]["total"]
        for n in range(held, PER_USER):
            body = {
                "recipients": {"groups": [group]},
                "title": f"Wave {n} picked",
                "body": "All lines of the wave were confirmed.",
                "category": "waves",
            }
            response = await client.post("/v1/notifications", json=body)
            assert response.status_code == 202, response.text
            last = str(response.json()["id"])
    return last


async def _last(hub: BenchHub, user: str) -> str:
    """The newest notification in the user's inbox (a repeat's trace screen shows it)."""
    headers = {"Authorization": f"Bearer {hub.admin_key}"}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=30) as client:
        page = await client.get("/v1/admin/inbox", params={"user": user, "limit": 1})
        return str(page.json()["items"][0]["id"])


async def console_pages(hub: BenchHub) -> dict[str, float]:
    if not Path(CHROMIUM).exists():  # noqa: ASYNC240 (one stat before the run)
        raise Skipped(f"Chromium is not at {CHROMIUM} (Debian: apt-get install chromium)")
    try:
        from playwright.async_api import async_playwright
    except ImportError as exc:  # the dev extra brings it
        raise Skipped("playwright is not installed (pip install -e '.[dev]')") from exc
    group = "gc-console"
    await make_group(hub, group, USERS)
    last = await _fill(hub, group) or await _last(hub, member_names(group, USERS)[0])
    user = member_names(group, USERS)[USERS // 2]
    screens = {
        "overview": "#/overview",
        "users": f"#/users?user={user}",
        "trace": f"#/trace?id={last}",
        "deliveries": "#/deliveries",
        "queues": "#/queues",
        "groups": "#/groups",
        "keys": "#/keys",
        "audit": "#/audit",
    }
    timings: dict[str, list[float]] = {name: [] for name in screens}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        context = await browser.new_context()
        key = hub.admin_key
        await context.add_init_script(f"sessionStorage.setItem('notifyhub.console.key', '{key}')")
        for _ in range(LOADS + 1):  # the first round warms the hub's and Chromium's caches
            for name, hash_ in screens.items():
                timings[name].append(await _load(context, f"{hub.base_url}/console{hash_}"))
        await browser.close()
    result: dict[str, float] = {}
    for name, times in timings.items():
        result[f"{name} p50 ms"] = statistics.median(times[1:])
        result[f"{name} max ms"] = max(times[1:])
    result["slowest screen max ms"] = max(max(t[1:]) for t in timings.values())
    return result


async def _load(context: Any, url: str) -> float:
    page = await context.new_page()
    try:
        await page.goto(url)
        await page.wait_for_function(READY, timeout=30_000)
        return float(await page.evaluate(ELAPSED))
    finally:
        await page.close()


scenarios.ALL += [("console pages, 10k users and 1M notifications", console_pages)]
