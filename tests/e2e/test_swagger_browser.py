"""`/docs` and `/redoc` render their operations in Chromium with every host but the hub's
blocked, and ask nothing of any other host: they work behind a firewall. The screenshot
is `docs/swagger-offline.png` when NOTIFYHUB_UPDATE_SCREENSHOT=1."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.slow

# Every host name but the hub's resolves to nothing: a machine with no way out.
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", OFFLINE]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "swagger-offline.png"


@pytest.fixture
async def offline_browser(chromium: str) -> AsyncIterator[Any]:
    playwright_api = pytest.importorskip("playwright.async_api")
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium, args=ARGS, headless=True
        )
        yield browser
        await browser.close()


async def test_swagger_ui_renders_with_no_network(offline_browser: Any, browser_hub: Any) -> None:
    page = await offline_browser.new_page(viewport={"width": 1280, "height": 1400})
    requested: list[str] = []
    failed: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))

    await page.goto(f"{browser_hub.base_url}/docs")
    operations = page.locator(".opblock")
    await operations.first.wait_for(timeout=30_000)  # a loaded machine: seconds to parse

    assert await operations.count() > 20
    paths = await page.locator(".opblock-summary-path").all_text_contents()
    assert any("/v1/notifications" in p for p in paths)
    assert failed == [] and errors == []
    assert {urlsplit(url).hostname for url in requested} == {"127.0.0.1"}
    path = SCREENSHOT if os.environ.get("NOTIFYHUB_UPDATE_SCREENSHOT") else None
    assert (await page.screenshot(path=path)).startswith(b"\x89PNG")


async def test_redoc_renders_and_asks_no_other_host(offline_browser: Any, browser_hub: Any) -> None:
    page = await offline_browser.new_page(viewport={"width": 1280, "height": 1000})
    requested: list[str] = []
    failed: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))

    await page.goto(f"{browser_hub.base_url}/redoc")
    operations = page.locator("[data-section-id^='operation/']")
    await operations.first.wait_for(timeout=30_000)
    await page.locator("text=API docs by Redocly").wait_for()  # the side menu, its logo in
    await page.wait_for_load_state("networkidle")

    assert await operations.count() > 20

    assert failed == [] and errors == []
    local = {"data", "blob"}  # the inline logo, ReDoc's search worker: made in the page
    assert {urlsplit(url).scheme for url in requested} <= {"http", *local}, requested
    hosts = {urlsplit(url).hostname for url in requested if urlsplit(url).scheme not in local}
    assert hosts == {"127.0.0.1"}, requested
