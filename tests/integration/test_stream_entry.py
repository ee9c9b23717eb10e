"""Event streams are served by their own entry (`StreamEntry`, api/fastpath.py), which
the chain's metrics and deadline let through: what the chain gives every request must
still hold. These hubs allow one cross-origin front end."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from notifyhub.api.routers import stream
from notifyhub.settings import Settings
from support.sse import EventReader
from support.tls import TEST_TLS

ORIGIN = "https://app.example"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"cors_origins": [ORIGIN]})


async def test_a_cross_origin_stream_gets_cors_headers(hub: Any, make_token: Any) -> None:
    headers = {"Authorization": f"Bearer {make_token('cora')}", "Origin": ORIGIN}
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(10.0), verify=TEST_TLS) as client,
        client.stream("GET", f"{hub.base_url}/v1/me/stream", headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == ORIGIN
        assert response.headers["access-control-allow-credentials"] == "true"
        assert (await EventReader(response).next()).event == "counts"
    refused = await hub.client.get("/v1/me/stream", headers={"Origin": ORIGIN})
    assert refused.status_code == 401  # a problem answered to a browser is readable too
    assert refused.headers["access-control-allow-origin"] == ORIGIN


async def test_a_bug_before_the_stream_starts_is_a_counted_500_problem(
    hub: Any, make_token: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("a bug in opening streams")

    monkeypatch.setattr(stream, "stream", broken)  # what the fast path serves
    auth = {"Authorization": f"Bearer {make_token('bugsy')}"}
    response = await hub.client.get("/v1/me/stream", headers=auth)
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "logged" in response.json()["detail"]
    metrics = (await hub.client.get("/metrics")).text
    assert (
        'notifyhub_http_requests_total{method="GET",route="/v1/me/stream",status="500"} 1.0'
        in metrics
    )
