"""The hub serves the browser client, its SharedWorker, its push service worker and the demo
page, and nothing else."""

from __future__ import annotations

from typing import Any


async def test_static_files_and_demo_headers(hub: Any) -> None:
    client = hub.client
    library = await client.get("/static/notifyhub.js")
    worker = await client.get("/static/notifyhub-worker.js")
    demo = await client.get("/demo")
    missing = await client.get("/static/nope.js")
    escape = await client.get("/static/..%2fapi%2fapp.py")
    assert library.status_code == 200 and "javascript" in library.headers["content-type"]
    assert "NotifyHub" in library.text and library.headers["cache-control"] == "no-cache"
    assert worker.status_code == 200 and "importScripts" in worker.text
    assert demo.status_code == 200 and demo.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in demo.headers["content-security-policy"]
    assert demo.headers["x-content-type-options"] == "nosniff"
    assert missing.status_code == 404 and escape.status_code == 404


async def test_the_push_service_worker_is_served_as_a_script(hub: Any) -> None:
    """A service worker must come as JavaScript; `no-cache` lets the browser's update
    check see a new version at once (its scope is /static/, no Service-Worker-Allowed)."""
    worker = await hub.client.get("/static/notifyhub-push-sw.js")
    assert worker.status_code == 200
    assert "javascript" in worker.headers["content-type"]
    assert worker.headers["cache-control"] == "no-cache"
    assert worker.headers["x-content-type-options"] == "nosniff"
    assert "service-worker-allowed" not in worker.headers
    assert 'addEventListener("push"' in worker.text


async def test_types_are_served_as_text(hub: Any) -> None:
    types = await hub.client.get("/static/notifyhub.d.ts")
    assert types.status_code == 200
    assert types.headers["content-type"] == "text/plain; charset=utf-8"
    assert types.headers["x-content-type-options"] == "nosniff"
    assert "export interface NotifyHubClient" in types.text


async def test_static_files_revalidate_with_etags(hub: Any) -> None:
    first = await hub.client.get("/static/notifyhub.js")
    again = await hub.client.get(
        "/static/notifyhub.js", headers={"If-None-Match": first.headers["etag"]}
    )
    assert again.status_code == 304
