"""Actions in headless Chromium: a notification's buttons in the demo inbox, clicked in one
tab, shown done in both, and told to the service exactly once as a signed webhook."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_browser import open_tabs, publish

from notifyhub.services import signing
from notifyhub.settings import Settings
from support.deliveries import define, reaching_localhost, unique
from support.receiver import Receiver

pytestmark = pytest.mark.slow

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "demo-actions.png"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return reaching_localhost(settings)


async def test_an_action_clicked_in_one_tab_is_done_in_both_and_sent_once(
    context: Any,
    mode: str,
    browser_hub: Any,
    hub: Any,
    admin_key: str,
    publish_key: str,
    make_token: Any,
    receiver: Receiver,
) -> None:
    definition = unique("expenses")
    created = await define(hub.client, admin_key, definition, url=receiver.url("/expenses"))
    actions = [
        {"id": "approve", "label": "Approve", "style": "primary", "webhook": definition},
        {"id": "reject", "label": "Reject", "style": "danger", "webhook": definition},
        {"id": "details", "label": "Details", "url": "/docs"},
    ]
    user = unique("finn")
    token = make_token(user)
    nid = await publish(
        hub,
        publish_key,
        user,
        title="Expense report 42: 120 EUR",
        body="Train tickets, Lisbon offsite",
        actions=actions,
        data={"expense": 42},
    )
    tabs = await open_tabs(context, browser_hub.base_url, token, mode)
    for tab in tabs:
        labels = tab.item(nid).locator("[data-testid=choices] button")
        assert await labels.all_inner_texts() == ["Approve", "Reject", "Details"]

    await tabs[0].item(nid).locator('[data-choice="approve"]').click()
    for tab in tabs:  # done in both: the chosen one marked, every button closed
        done = tab.item(nid).locator('[data-choice="approve"].done')
        await done.filter(has_text="✓ Approve").wait_for()
        assert await tab.item(nid).get_attribute("data-status") == "read"
        disabled = (
            await tab.item(nid)
            .locator("[data-testid=choices] button")
            .evaluate_all("bs => bs.map(b => b.disabled)")
        )
        assert disabled == [True, True, True]

    [arrived] = await receiver.wait_for("/expenses", 1)
    assert signing.verify(created["secret"], arrived.headers, arrived.body, int(time.time()))
    sent = json.loads(arrived.body)
    assert (sent["type"], sent["user"], sent["notification_id"], sent["action"]) == (
        "action.completed",
        user,
        nid,
        "approve",
    )
    # the other tab's client asking again (a stale page, a double click): 409, nothing sent
    refused = await tabs[1].js(
        "id => notifyhubDemo.client.completeAction(id, 'reject')"
        ".then(() => null, e => [e.status, e.problem.completed.action])",
        nid,
    )
    assert refused == [409, "approve"]
    if mode == "shared-worker":
        await tabs[0].item(nid).screenshot(path=str(SCREENSHOT))
    await receiver.wait_for("/expenses", 1)
    assert len(receiver.at("/expenses")) == 1
    assert [error for tab in tabs for error in tab.errors] == []
