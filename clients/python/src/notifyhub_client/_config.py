"""What both clients set up the same way."""

from __future__ import annotations

import httpx

VERSION = "0.1.0"
USER_AGENT = f"notifyhub-client-python/{VERSION}"
DEFAULT_TIMEOUT_S = 10.0


def configure(
    http: httpx.Client | httpx.AsyncClient, base_url: str | None, api_key: str | None
) -> None:
    """Point `http` at the hub and authenticate every request with the API key (a given
    `http_client` keeps its own transport, hooks and limits)."""
    if base_url is not None:
        http.base_url = httpx.URL(base_url)
    http.headers["User-Agent"] = USER_AGENT
    if api_key is not None:
        http.headers["Authorization"] = f"Bearer {api_key}"
