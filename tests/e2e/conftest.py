"""Browser fixtures: Debian's headless Chromium driven by Playwright, and a hub that can be
stopped and started again on the same port (a network cut, as the browser sees it)."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import uvicorn

from notifyhub.api.app import create_app
from notifyhub.process.server import HubServer
from notifyhub.settings import Settings

CHROMIUM = os.environ.get("NOTIFYHUB_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Every page reports the visibility the test sets (headless tabs are all "visible").
VISIBILITY_HOOK = """
Object.defineProperty(Document.prototype, "visibilityState", {
  configurable: true,
  get() { return window.__nhHidden ? "hidden" : "visible"; },
});
Object.defineProperty(Document.prototype, "hidden", {
  configurable: true,
  get() { return Boolean(window.__nhHidden); },
});
"""
NO_SHARED_WORKER = "delete window.SharedWorker;"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrowserHub:
    """A real uvicorn hub on a fixed port that a test can stop and start again."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._server: HubServer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        app = create_app(self.settings)
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            lifespan="on",
            log_level="warning",
            timeout_graceful_shutdown=3,
        )
        self._server = server = HubServer(config, app)
        self._task = task = asyncio.create_task(server.serve())
        async with asyncio.timeout(15):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.stop()
        await self._task
        self._server = self._task = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium (browser downloads do not work here): skip the tests without it."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture(scope="session")
async def browser(chromium: str) -> AsyncIterator[Any]:
    playwright_api = pytest.importorskip("playwright.async_api")
    async with playwright_api.async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=chromium, args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        await launched.close()


@pytest.fixture
async def start_browser_hub() -> AsyncIterator[Callable[[Settings], Awaitable[BrowserHub]]]:
    """Start hubs for the browser; every one still running is stopped at the end."""
    started: list[BrowserHub] = []

    async def start(settings: Settings) -> BrowserHub:
        browser_hub = BrowserHub(settings)
        await browser_hub.start()
        started.append(browser_hub)
        return browser_hub

    yield start
    for browser_hub in started:
        await browser_hub.stop()


@pytest.fixture
async def browser_hub(
    settings: Settings, start_browser_hub: Callable[[Settings], Awaitable[BrowserHub]]
) -> BrowserHub:
    return await start_browser_hub(settings)


@pytest.fixture(params=["shared-worker", "tab"])
def mode(request: pytest.FixtureRequest) -> str:
    """Both transports: the SharedWorker, and the per-tab fallback without it."""
    return str(request.param)


@pytest.fixture
async def context(browser: Any, mode: str) -> AsyncIterator[Any]:
    """A fresh browser profile (its own SharedWorkers and storage) for one test."""
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
    await ctx.add_init_script(VISIBILITY_HOOK)
    if mode == "tab":
        await ctx.add_init_script(NO_SHARED_WORKER)
    yield ctx
    await ctx.close()
