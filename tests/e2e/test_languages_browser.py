"""The client's own words in the browser's language: notifyhub.js picks its string table
from `navigator.language` (pt-BR -> pt -> English), and the demo speaks it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_browser import open_tab, publish

from support.deliveries import unique

pytestmark = pytest.mark.slow

STATIC = Path(__file__).resolve().parents[2] / "src" / "notifyhub" / "static"


async def test_the_demo_speaks_the_browsers_language(
    browser: Any, browser_hub: Any, hub: Any, publish_key: str, make_token: Any
) -> None:
    user = unique("lia")
    token = make_token(user)
    nid = await publish(hub, publish_key, user, title="Olá")
    expected = {
        "pt-BR": ("pt", "Marcar como lida", "Todas", "1 não lidas · 1 notificação"),
        "en-US": ("en", "Mark read", "All", "1 unread · 1 notification"),
        "de-DE": ("en", "Mark read", "All", "1 unread · 1 notification"),  # no German: English
    }
    for locale, (language, read, tab, summary) in expected.items():
        context = await browser.new_context(locale=locale)
        try:
            page = await open_tab(context, browser_hub.base_url, token)
            assert await page.js("document.documentElement.lang") == language
            row = page.item(nid)
            assert await row.locator("[data-action=toggle-read]").inner_text() == read
            first_tab = page.page.locator("[data-testid=tab]").first
            assert (await first_tab.locator(".tab-label").inner_text()) == tab
            await page.page.locator("[data-testid=summary]").filter(has_text=summary).wait_for()
            assert page.errors == []
        finally:
            await context.close()
    tables = await page_free_strings(browser)
    assert tables["keys"] == tables["pt_keys"]  # every English string has its Portuguese
    assert tables["chain"] == ["pt", "pt", "en", "en"]


async def page_free_strings(browser: Any) -> dict[str, Any]:
    """notifyhub.js's tables and its fallback chain, on a blank page."""
    context = await browser.new_context()
    page = await context.new_page()
    await page.set_content("<!doctype html><title>t</title>")
    await page.add_script_tag(path=str(STATIC / "notifyhub.js"))
    found = await page.evaluate(
        """() => ({
          keys: Object.keys(NotifyHub.STRINGS.en).sort(),
          pt_keys: Object.keys(NotifyHub.STRINGS.pt).sort(),
          chain: ['pt-BR', 'PT', 'fr-CA', undefined].map(l => NotifyHub.strings(l).language),
        })"""
    )
    await context.close()
    return dict(found)
