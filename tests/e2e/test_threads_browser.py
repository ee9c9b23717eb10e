"""Threads in headless Chromium: the social comment case. 20 comments by 5 actors on one
post make one item in the demo inbox, counted once, with the count and 5 stacked avatars,
live in two tabs; the list (REST) agrees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from test_browser import open_tabs, publish

from support.deliveries import unique

pytestmark = pytest.mark.slow

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "demo-thread.png"
ACTORS = ["ana", "bruno", "chen", "dara", "eli"]


async def test_twenty_comments_make_one_live_thread_in_two_tabs(
    context: Any, mode: str, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    user = unique("olga")
    token = make_token(user)
    before = await publish(hub, publish_key, user, title="Welcome aboard")
    tabs = await open_tabs(context, browser_hub.base_url, token, mode)
    thread = None
    for n in range(20):
        who = ACTORS[n % 5]
        sent = await publish(
            hub,
            publish_key,
            user,
            title=f"{who.title()} commented on “Launch plan”",
            body=f"Comment {n + 1}: **looks good**",
            body_format="markdown",
            actor={"id": who, "name": who.title()},
            thread_key="post:p1:comments",
        )
        thread = thread or sent
    for tab in tabs:
        row = tab.item(thread)
        await row.locator("[data-testid=activity-count]").filter(has_text="20").wait_for()
        assert await row.locator("[data-testid=faces] .avatar").count() == 5
        assert await row.locator(".title").inner_text() == "Eli commented on “Launch plan”"
        assert await row.locator(".body strong").inner_text() == "looks good"
        ids = await tab.js(
            "() => [...document.querySelectorAll('[data-testid=list] > [data-testid=item]')]"
            ".map(r => r.dataset.id)"
        )
        assert ids == [thread, before]  # one item for the thread, on top
        await tab.page.locator("[data-testid=badge]").filter(has_text="2").wait_for()
    async with httpx.AsyncClient(base_url=browser_hub.base_url) as client:
        listed = await client.get(
            "/v1/me/notifications", headers={"Authorization": f"Bearer {token}"}
        )
    [item, _] = listed.json()["items"]
    assert item["thread"]["activity_count"] == 20
    assert [a["id"] for a in item["thread"]["actors"]] == ["eli", "dara", "chen", "bruno", "ana"]
    if mode == "shared-worker":
        await tabs[0].item(thread).screenshot(path=str(SCREENSHOT))
    assert [error for tab in tabs for error in tab.errors] == []
