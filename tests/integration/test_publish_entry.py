"""A publish is served by its own entry (`PublishEntry`, api/fastpath.py) inside the
hub's one middleware chain: what the chain gives every request must still hold, and a
request the entry hands on to the FastAPI route is limited and counted once. These hubs
allow one cross-origin front end."""

from __future__ import annotations

from typing import Any

import pytest

from notifyhub.api.routers import notifications
from notifyhub.services.tokens import TokenService
from notifyhub.settings import Settings

ORIGIN = "https://app.example"
COUNTED = 'notifyhub_http_requests_total{{method="POST",route="/v1/notifications",status="{}"}}'


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"cors_origins": [ORIGIN]})


def _counted(metrics: str, status: int) -> float:
    prefix = COUNTED.format(status) + " "
    lines = [line for line in metrics.splitlines() if line.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else 0.0


async def test_a_cross_origin_publish_gets_cors_headers(hub: Any, publish_key: str) -> None:
    headers = {"Authorization": f"Bearer {publish_key}", "Origin": ORIGIN}
    body = {"recipients": {"users": ["cora"]}, "title": "hello"}
    accepted = await hub.client.post("/v1/notifications", json=body, headers=headers)
    assert accepted.status_code == 202
    assert accepted.headers["access-control-allow-origin"] == ORIGIN
    refused = await hub.client.post("/v1/notifications", json=body, headers={"Origin": ORIGIN})
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == ORIGIN


async def test_a_request_handed_on_to_the_route_is_counted_once(hub: Any, publish_key: str) -> None:
    """No title: the fast path hands it on, and the FastAPI route answers its 422."""
    auth = {"Authorization": f"Bearer {publish_key}"}
    before = _counted((await hub.client.get("/metrics")).text, 422)
    response = await hub.client.post(
        "/v1/notifications", json={"recipients": {"users": ["dee"]}}, headers=auth
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert "title" in response.text
    assert _counted((await hub.client.get("/metrics")).text, 422) == before + 1


async def test_a_bug_in_a_publish_is_a_counted_500_problem(
    hub: Any, publish_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: Any) -> None:
        raise RuntimeError("a bug in publishing")

    monkeypatch.setattr(notifications, "serve", broken)  # what the fast path serves
    auth = {"Authorization": f"Bearer {publish_key}", "Origin": ORIGIN}
    body = {"recipients": {"users": ["bugsy"]}, "title": "hello"}
    response = await hub.client.post("/v1/notifications", json=body, headers=auth)
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "logged" in response.json()["detail"]
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert _counted((await hub.client.get("/metrics")).text, 500) == 1


async def test_a_bug_in_the_route_a_publish_was_handed_on_to_is_a_counted_500(
    hub: Any, publish_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path hands the request on (`_parse` declines it); the FastAPI route then
    fails unexpectedly, before answering: the entry answers 500, counted once."""

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug behind the route")

    monkeypatch.setattr(notifications, "_parse", lambda request, body: None)
    monkeypatch.setattr(hub.app_state["ingest"], "publish", broken)
    auth = {"Authorization": f"Bearer {publish_key}"}
    body = {"recipients": {"users": ["handed-on"]}, "title": "hello"}
    response = await hub.client.post("/v1/notifications", json=body, headers=auth)
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert _counted((await hub.client.get("/metrics")).text, 500) == 1


async def test_a_bug_in_any_other_route_is_a_500_a_browser_can_read(
    hub: Any, make_token: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request passes the one chain: FastAPI's 500 for a bug is inside CORS and
    metrics, as the hot entries' is."""

    def broken(*args: Any) -> None:
        raise RuntimeError("a bug in minting")

    monkeypatch.setattr(TokenService, "mint_stream_token", broken)
    headers = {"Authorization": f"Bearer {make_token('mint')}", "Origin": ORIGIN}
    response = await hub.client.post("/v1/me/stream-tokens", headers=headers)
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["access-control-allow-origin"] == ORIGIN
    metrics = (await hub.client.get("/metrics")).text
    counted = 'method="POST",route="/v1/me/stream-tokens",status="500"} 1.0'
    assert "notifyhub_http_requests_total{" + counted in metrics
