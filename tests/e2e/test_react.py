"""@notifyhub/react in headless Chromium: the sample app (clients/react/sample, bundled with
esbuild) renders <Inbox> under <NotifyHubProvider> in React's StrictMode, lists what was
there, receives a live notification, marks it read on a click and shows the counts change.

Twice: served from another origin than the hub (the usual deployment: CORS, one stream per
tab since a SharedWorker must be same-origin), and from the hub's origin (one SharedWorker)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from notifyhub.settings import Settings
from support import npm

pytestmark = [pytest.mark.slow, pytest.mark.timeout(npm.NPM_CI_TIMEOUT_S + 120)]

SAME_ORIGIN_PATH = "/react-sample/"


@pytest.fixture(scope="module")
async def sample_dir() -> Path:
    """index.html and app.js: npm ci and esbuild, each cached (tests/support/npm.py)."""
    started = time.monotonic()
    took = await asyncio.to_thread(npm.node_modules)
    out = await asyncio.to_thread(npm.sample_bundle)
    print(
        f"\nnpm ci: {f'{took:.1f} s' if took else 'cached'};"
        f" npm ci + esbuild: {time.monotonic() - started:.1f} s"
    )
    return out


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def static_server(sample_dir: Path) -> Iterator[str]:
    """The sample on its own origin: a static file server on 127.0.0.1."""
    handler = functools.partial(_Quiet, directory=str(sample_dir))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(params=["cross-origin", "same-origin"])
def origin(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Sample:
    """The sample page, and the errors and warnings it logged."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on("pageerror", lambda error: self.problems.append(f"pageerror: {error}"))
        page.on(
            "console",
            lambda m: (
                m.type in ("error", "warning") and self.problems.append(f"{m.type}: {m.text}")
            ),
        )

    def item(self, notification_id: str) -> Any:
        return self.page.locator(f'[data-nh=item][data-id="{notification_id}"]')

    async def badge(self) -> str:
        return str(await self.page.locator("[data-nh=badge]").text_content())

    async def wait_badge(self, text: str) -> None:
        await self.page.wait_for_function(
            "t => document.querySelector('[data-nh=badge]')?.textContent === t", arg=text
        )


async def publish(base_url: str, key: str, user: str, title: str) -> str:
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.post(
            "/v1/notifications",
            json={"recipients": {"users": [user]}, "title": title, "body": f"{title}, in full"},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


@pytest.fixture
async def sample_page(
    browser: Any,
    origin: str,
    sample_dir: Path,
    static_server: str,
    settings: Settings,
    start_browser_hub: Callable[[Settings], Awaitable[Any]],
) -> AsyncIterator[tuple[Any, str, str]]:
    """A browser context, the page URL to open (before its fragment) and the hub's URL."""
    if origin == "cross-origin":
        settings = settings.model_copy(update={"cors_origins": [static_server]})
    hub = await start_browser_hub(settings)
    context = await browser.new_context()
    if origin == "cross-origin":
        url = f"{static_server}/"
    else:
        url = f"{hub.base_url}{SAME_ORIGIN_PATH}"

        async def serve(route: Any) -> None:
            name = route.request.url.split(SAME_ORIGIN_PATH, 1)[1].split("#")[0] or "index.html"
            await route.fulfill(path=sample_dir / name)

        await context.route(f"{hub.base_url}{SAME_ORIGIN_PATH}**", serve)
    yield context, url, hub.base_url
    await context.close()


async def test_inbox_lists_receives_marks_read_and_counts(
    sample_page: tuple[Any, str, str], origin: str, publish_key: str, make_token: Any
) -> None:
    context, url, hub_url = sample_page
    user = f"react-{origin}"
    earlier = await publish(hub_url, publish_key, user, "Before the page opened")

    sample = Sample(await context.new_page())
    opened = time.monotonic()
    await sample.page.goto(f"{url}#hub={hub_url}&token={make_token(user)}")
    await sample.page.locator("[data-nh=inbox][data-connection=open]").wait_for()
    await sample.item(earlier).wait_for()
    await sample.wait_badge("1")
    print(f"\n[{origin}] page open -> inbox listed and live: {time.monotonic() - opened:.2f} s")
    expected_mode = "tab" if origin == "cross-origin" else "shared-worker"
    assert await sample.page.evaluate("notifyhubSample.client.mode") == expected_mode

    posted = time.monotonic()
    live = await publish(hub_url, publish_key, user, "Live one")
    await sample.item(live).wait_for()
    print(f"[{origin}] POST -> rendered: {(time.monotonic() - posted) * 1000:.0f} ms")
    assert await sample.item(live).get_attribute("data-status") == "unread"
    await sample.wait_badge("2")
    ids = await sample.page.locator("[data-nh=item]").evaluate_all(
        "els => els.map(e => e.dataset.id)"
    )
    assert ids == [live, earlier]  # newest first

    await sample.item(live).locator("button").click()
    await sample.page.locator(f'[data-nh=item][data-id="{live}"][data-status=read]').wait_for()
    await sample.wait_badge("1")
    detail = sample.page.locator(f'[data-nh=detail][data-id="{live}"]')  # useNotification(id)
    await detail.wait_for()
    await sample.page.locator(f'[data-nh=detail][data-id="{live}"][data-status=read]').wait_for()
    assert await sample.item(earlier).get_attribute("data-status") == "unread"

    await sample.page.locator("[data-nh=mark-all]").click()
    await sample.page.locator(f'[data-nh=item][data-id="{earlier}"][data-status=read]').wait_for()
    await sample.wait_badge("0")
    assert await sample.page.locator("[data-nh=mark-all]").is_disabled()
    assert sample.problems == []
