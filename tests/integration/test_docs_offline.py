"""`/docs` and `/redoc` load nothing from outside the hub: every script, stylesheet and
icon their pages name is served by the hub itself."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest

ASSET = re.compile(r"""<(?:script|link)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']""", re.I)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_doc_pages_name_only_the_hubs_own_files(hub: Any, page: str) -> None:
    response = await hub.client.get(page)
    assert response.status_code == 200
    html = response.text
    assert "https://" not in html and "http://" not in html  # no CDN, no web fonts

    assets = ASSET.findall(html)
    assert len(assets) >= 2  # the script and the favicon at least (Swagger: + stylesheet)
    for asset in assets:
        url = urljoin(f"{hub.base_url}{page}", asset)
        assert urlsplit(url).netloc == urlsplit(hub.base_url).netloc, asset
        fetched = await hub.client.get(url)
        assert fetched.status_code == 200, asset
        assert len(fetched.content) > 1000, asset


async def test_swagger_ui_gets_the_bundle_and_the_schema(hub: Any) -> None:
    html = (await hub.client.get("/docs")).text
    bundle = await hub.client.get("/docs/assets/swagger-ui-bundle.js")
    assert "SwaggerUIBundle" in bundle.text
    assert "javascript" in bundle.headers["content-type"]
    assert "url: '/openapi.json'" in html
    assert '"validatorUrl": null' in html  # no schema sent to validator.swagger.io
    assert (await hub.client.get("/docs/oauth2-redirect")).status_code == 200
    assert (await hub.client.get("/openapi.json")).status_code == 200


async def test_redoc_gets_its_bundle_without_the_cdn_logo(hub: Any) -> None:
    html = (await hub.client.get("/redoc")).text
    assert 'src="/docs/redoc.js"' in html
    bundle = await hub.client.get("/docs/redoc.js")
    assert "javascript" in bundle.headers["content-type"]
    assert "Redoc.init" in bundle.text or "redoc" in bundle.text.lower()
    assert "cdn.redoc.ly" not in bundle.text  # its side menu's logo: an inline image
    assert "data:image/svg+xml" in bundle.text
