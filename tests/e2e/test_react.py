"""@notifyhub/react in headless Chromium: the sample app (clients/react/sample, bundled with
esbuild) renders <Inbox> under <NotifyHubProvider> in React's StrictMode, lists what was
there, receives a live notification, marks it read on a click and shows the counts change;
listing one view (tab), it adds a live notification only if the view holds it, and its
"Mark all read" marks only the view's.

Twice: served from another origin than the hub (the usual deployment: CORS, one stream per
tab since a SharedWorker must be same-origin), and from the hub's origin (one SharedWorker)."""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from notifyhub.domain.notification import Severity
from notifyhub.domain.views import ViewFilter
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


async def publish(
    base_url: str, key: str, user: str, title: str, tags: tuple[str, ...] = ()
) -> str:
    body = {"recipients": {"users": [user]}, "title": title, "body": f"{title}, in full"}
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.post(
            "/v1/notifications",
            json={**body, "tags": list(tags)},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def put_view(base_url: str, token: str, name: str, view_filter: dict[str, Any]) -> None:
    """One of the user's own views (`PUT /v1/me/views/{name}`), counted when it answers."""
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.put(
            f"/v1/me/views/{name}",
            json={"filter": view_filter},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert response.status_code in (200, 201), response.text


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


async def test_inbox_renders_markdown_bodies(
    sample_page: tuple[Any, str, str], origin: str, publish_key: str, make_token: Any
) -> None:
    """A markdown body shows rendered (notifyhub.js's `renderBody`: markdown-it and
    DOMPurify, loaded from the hub by the provider); a text body stays text."""
    context, url, hub_url = sample_page
    user = f"react-md-{origin}"
    ids = {}
    async with httpx.AsyncClient(base_url=hub_url) as client:
        for name, fields in (
            ("markdown", {"body": "Invoice **42** is `overdue`", "body_format": "markdown"}),
            ("text", {"body": "a **literal** star"}),
        ):
            body = {"recipients": {"users": [user]}, "title": name, **fields}
            answer = await client.post(
                "/v1/notifications", json=body, headers={"Authorization": f"Bearer {publish_key}"}
            )
            assert answer.status_code == 202, answer.text
            ids[name] = answer.json()["id"]

    sample = Sample(await context.new_page())
    await sample.page.goto(f"{url}#hub={hub_url}&token={make_token(user)}")
    rendered = sample.item(ids["markdown"]).locator("[data-nh=body] strong")
    await rendered.wait_for()
    assert await rendered.text_content() == "42"
    code = sample.item(ids["markdown"]).locator("[data-nh=body] code")
    assert await code.text_content() == "overdue"
    text = sample.item(ids["text"]).locator("[data-nh=body]")
    assert await text.text_content() == "a **literal** star"
    assert await text.locator("strong").count() == 0
    assert sample.problems == []


# ---- a view's list: live notifications outside the view stay out ------------------------

RECORD_RECEIVED = """() => {
  window.__received = [];
  notifyhubSample.client.on("notification", (n) => __received.push(n.id));
}"""

# The hub's rule (notifyhub.domain.views.ViewFilter.holds, lua/common.lua view_mask) against
# the hook's `inView`, over every pair of these filters and items.
VIEW_FILTERS: list[dict[str, Any]] = [
    {},
    {"categories": [], "tags_any": [], "tags_all": []},
    {"tags_any": ["billing"]},
    {"tags_any": ["billing", "mention"]},
    {"tags_all": ["ops", "db"]},
    {"categories": ["orders", "billing"]},
    {"severity_at_least": "warning"},
    {"severity_at_least": "critical"},
    {
        "categories": ["orders"],
        "tags_any": ["a", "b"],
        "tags_all": ["c"],
        "severity_at_least": "error",
    },
]
VIEW_ITEMS: list[dict[str, Any]] = [
    {"category": None, "severity": "info", "tags": []},
    {"category": "orders", "severity": "success", "tags": ["billing"]},
    {"category": "billing", "severity": "warning", "tags": ["mention", "ops"]},
    {"category": "restock", "severity": "error", "tags": ["db", "ops"]},
    {"category": "orders", "severity": "error", "tags": ["b", "c"]},
    {"category": "orders", "severity": "critical", "tags": ["a", "b"]},
    {"category": "orders", "severity": "warning", "tags": ["a", "c"]},
]
IN_VIEW = "cases => cases.map(([filter, item]) => notifyhubSample.inView(filter, item))"


def holds(view_filter: dict[str, Any], item: dict[str, Any]) -> bool:
    rule = ViewFilter.from_json(view_filter)
    return rule.holds(item["category"], Severity(item["severity"]), set(item["tags"]))


async def open_view(sample: Sample, url: str, hub_url: str, token: str, view: str) -> None:
    await sample.page.goto(f"{url}#hub={hub_url}&token={token}&view={view}")
    await sample.page.locator("[data-nh=inbox][data-connection=open]").wait_for()
    await sample.page.wait_for_function("() => Boolean(window.notifyhubSample?.client)")
    await sample.page.evaluate(RECORD_RECEIVED)


async def listed(sample: Sample) -> list[str]:
    ids = await sample.page.locator("[data-nh=item]").evaluate_all(
        "els => els.map(e => e.dataset.id)"
    )
    return [str(i) for i in ids]


async def received(sample: Sample, notification_id: str) -> None:
    await sample.page.wait_for_function("id => window.__received.includes(id)", arg=notification_id)


async def test_view_list_adds_live_notifications_of_its_view_only(
    sample_page: tuple[Any, str, str], origin: str, publish_key: str, make_token: Any
) -> None:
    context, url, hub_url = sample_page
    user = f"react-view-{origin}-{uuid.uuid4().hex[:8]}"
    token = make_token(user)
    await put_view(hub_url, token, "billing", {"tags_any": ["billing"]})
    earlier = await publish(hub_url, publish_key, user, "Invoice 1 paid", ("billing", "x"))
    elsewhere = await publish(hub_url, publish_key, user, "Restock A-12")

    sample = Sample(await context.new_page())
    await open_view(sample, url, hub_url, token, "billing")
    await sample.item(earlier).wait_for()
    assert await listed(sample) == [earlier]  # the hub's ?view= page
    cases = list(itertools.product(VIEW_FILTERS, VIEW_ITEMS))
    assert await sample.page.evaluate(IN_VIEW, cases) == [holds(f, i) for f, i in cases]

    # Outside the view: received, and handled before the next one renders (events are
    # handled in order, React renders their state changes in order), but not listed.
    outside = await publish(hub_url, publish_key, user, "Restock B-7", ("restock",))
    await received(sample, outside)
    inside = await publish(hub_url, publish_key, user, "Invoice 2 paid", ("billing",))
    await sample.item(inside).wait_for()
    assert await listed(sample) == [inside, earlier]
    await sample.wait_badge("4")  # the badge counts the whole inbox, not the view
    assert elsewhere not in await listed(sample)
    assert sample.problems == []


async def test_mark_all_read_in_a_view_marks_only_the_views_items(
    sample_page: tuple[Any, str, str], origin: str, publish_key: str, make_token: Any
) -> None:
    """<Inbox view=...>'s "Mark all read" sends the view (read-all `{"view": ...}`): the
    view's copies are read, the others stay unread, and the button is then disabled (the
    view has none unread) while the badge still counts the inbox."""
    context, url, hub_url = sample_page
    user = f"react-viewread-{origin}-{uuid.uuid4().hex[:8]}"
    token = make_token(user)
    await put_view(hub_url, token, "billing", {"tags_any": ["billing"]})
    inside = await publish(hub_url, publish_key, user, "Invoice 1 paid", ("billing",))
    outside = await publish(hub_url, publish_key, user, "Restock A-12")

    sample = Sample(await context.new_page())
    bodies: list[Any] = []
    sample.page.on(
        "request",
        lambda r: r.url.endswith("/read-all") and bodies.append(r.post_data_json),
    )
    await open_view(sample, url, hub_url, token, "billing")
    await sample.item(inside).wait_for()
    await sample.wait_badge("2")
    await sample.page.locator("[data-nh=mark-all]:enabled").click()
    await sample.page.locator(f'[data-nh=item][data-id="{inside}"][data-status=read]').wait_for()
    await sample.wait_badge("1")
    await sample.page.locator("[data-nh=mark-all]:disabled").wait_for()
    assert bodies == [{"view": "billing"}]
    async with httpx.AsyncClient(base_url=hub_url) as client:
        unread = await client.get(
            "/v1/me/notifications?status=unread", headers={"Authorization": f"Bearer {token}"}
        )
    assert [item["id"] for item in unread.json()["items"]] == [outside]
    assert sample.problems == []


@pytest.mark.parametrize("origin", ["cross-origin"])
async def test_view_list_without_the_views_definition_reloads_on_live_ones(
    sample_page: tuple[Any, str, str], origin: str, publish_key: str, make_token: Any
) -> None:
    """A hub whose GET /v1/me/views is a 404 (before views): a live notification reloads
    the view's first page rather than being added whatever its view."""
    context, url, hub_url = sample_page
    user = f"react-noviews-{uuid.uuid4().hex[:8]}"
    token = make_token(user)
    await put_view(hub_url, token, "billing", {"tags_any": ["billing"]})
    earlier = await publish(hub_url, publish_key, user, "Invoice 1 paid", ("billing",))

    async def no_views(route: Any) -> None:
        await route.fulfill(
            status=404,
            json={"title": "Not Found", "status": 404},
            headers={"Access-Control-Allow-Origin": url.rstrip("/")},
        )

    await context.route(f"{hub_url}/v1/me/views", no_views)
    sample = Sample(await context.new_page())
    lists: list[str] = []
    sample.page.on(
        "request",
        lambda r: "/v1/me/notifications?" in r.url and r.method == "GET" and lists.append(r.url),
    )
    await open_view(sample, url, hub_url, token, "billing")
    await sample.item(earlier).wait_for()
    loaded = len(lists)

    outside = await publish(hub_url, publish_key, user, "Restock B-7")
    await received(sample, outside)
    inside = await publish(hub_url, publish_key, user, "Invoice 2 paid", ("billing",))
    await sample.item(inside).wait_for()
    assert await listed(sample) == [inside, earlier]
    assert len(lists) > loaded and all("view=billing" in u for u in lists)
    # The 404 this test made is the only problem the page logged.
    assert [p for p in sample.problems if "404" not in p] == []


# ---- the preference matrix: category x channel ------------------------------------------


async def test_preference_matrix_shows_and_saves_each_channel(
    sample_page: tuple[Any, str, str], origin: str, make_token: Any
) -> None:
    """<PreferenceMatrix>: rows are the given categories and the user's own; columns are
    the channels the hub answers with; a click PUTs and shows what the hub returned."""
    context, url, hub_url = sample_page
    token = make_token(f"react-prefs-{origin}-{uuid.uuid4().hex[:8]}")
    async with httpx.AsyncClient(base_url=hub_url) as client:
        put = await client.put(
            "/v1/me/preferences",
            json={"categories": {"orders": {"inbox": True, "push": False}}},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert put.status_code == 200, put.text
    channels = [c for c in ("inbox", "email", "push") if c in put.json()["categories"]["orders"]]

    sample = Sample(await context.new_page())
    await sample.page.goto(f"{url}#hub={hub_url}&token={token}&matrix=billing")
    matrix = sample.page.locator("[data-nh=preferences]")
    rows = matrix.locator("[data-nh=preference]")
    await matrix.locator("input:enabled").first.wait_for()
    assert await rows.evaluate_all("rs => rs.map((r) => r.dataset.category)") == [
        "billing",
        "orders",
    ]
    columns = await matrix.locator("th[data-channel]").evaluate_all(
        "hs => hs.map((h) => h.dataset.channel)"
    )
    assert columns == channels

    def box(category: str, channel: str) -> Any:
        return matrix.locator(f'[data-category="{category}"] input[data-channel="{channel}"]')

    assert not await box("orders", "push").is_checked()
    assert await box("billing", "push").is_checked()  # not set: on
    await box("billing", "push").click()
    await matrix.locator('[data-category="billing"] input[data-channel="push"]:enabled').wait_for()
    await sample.page.wait_for_function(
        "() => !document.querySelector('[data-category=billing] input[data-channel=push]').checked"
    )
    async with httpx.AsyncClient(base_url=hub_url) as client:
        saved = await client.get("/v1/me/preferences", headers={"Authorization": f"Bearer {token}"})
    categories = saved.json()["categories"]
    assert categories["billing"]["push"] is False and categories["billing"]["inbox"] is True
    assert categories["orders"] == put.json()["categories"]["orders"]
    assert sample.problems == []
