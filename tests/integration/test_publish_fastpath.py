"""POST /v1/notifications: valid requests take the fast path, others get FastAPI's answers."""

from __future__ import annotations

from typing import Any

import pytest

from notifyhub.settings import RateLimits, Settings


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_valid_publish_is_accepted_and_delivered(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    body = {"recipients": {"users": ["fp-ann"]}, "title": "fast"}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert response.status_code == 202, response.text
    assert response.headers["content-type"] == "application/json"
    accepted = response.json()
    assert set(accepted) == {"id", "recipients", "scheduled_for"}
    assert accepted["recipients"] == 1 and accepted["scheduled_for"] is None
    inbox = await hub.client.get("/v1/me/notifications", headers=_auth(make_token("fp-ann")))
    assert [item["id"] for item in inbox.json()["items"]] == [accepted["id"]]


@pytest.mark.parametrize(
    ("content", "headers", "field"),
    [
        (b'{"recipients": {"users": ["a"]}, "title": "t", "extra": 1}', {}, "body.extra"),
        (b'{"recipients": {"users": ["a"]}}', {}, "body.title"),
        (b"", {}, "body"),
        (b"{not json", {}, "body"),
        (b'{"recipients": {"users": ["a"]}, "title": "t"}', {"content-type": "text/plain"}, "body"),
        (
            b'{"recipients": {"users": ["a"]}, "title": "t", "data": {"n": 1' + b"0" * 30 + b"}}",
            {},
            "body.data",
        ),
        (
            b'{"recipients": {"users": ["a"]}, "title": "t"}',
            {"idempotency-key": "k" * 201},
            "header.idempotency-key",
        ),
        (
            b'{"recipients": {"users": ["a"]}, "title": "t"}',
            {"idempotency-key": ""},
            "header.idempotency-key",
        ),
    ],
)
async def test_invalid_requests_get_fastapis_problem_details(
    hub: Any, publish_key: str, content: bytes, headers: dict[str, str], field: str
) -> None:
    """What the fast path does not take is answered by the FastAPI route: 422 with the
    failing field named as FastAPI names it (`body.`/`header.` prefixes)."""
    headers = {"content-type": "application/json", **headers, **_auth(publish_key)}
    response = await hub.client.post("/v1/notifications", content=content, headers=headers)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert field in [error["field"] for error in response.json()["errors"]], response.text


async def test_bad_keys_are_refused_before_the_body_is_read(hub: Any) -> None:
    response = await hub.client.post(
        "/v1/notifications", content=b"{not json", headers=_auth("nh_wrong")
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    limits = RateLimits(per_key_per_s=1 / 60, per_key_burst=2)
    return settings.model_copy(update={"rate_limits": limits})


async def test_a_request_handed_to_fastapi_is_charged_once(hub: Any, publish_key: str) -> None:
    """The fast path authenticates (and spends a token) once; the route reuses that."""
    invalid = await hub.client.post(
        "/v1/notifications", json={"title": "no recipients"}, headers=_auth(publish_key)
    )
    assert invalid.status_code == 422
    body = {"recipients": {"users": ["fp-bo"]}, "title": "second token"}
    valid = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert valid.status_code == 202, valid.text
    third = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert third.status_code == 429


async def test_metrics_name_the_route(hub: Any, publish_key: str) -> None:
    body = {"recipients": {"users": ["fp-cy"]}, "title": "counted"}
    await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    metrics = (await hub.client.get("/metrics")).text
    assert 'route="/v1/notifications",status="202"' in metrics


async def test_other_methods_on_the_path_are_untouched(hub: Any, publish_key: str) -> None:
    response = await hub.client.get("/v1/notifications", headers=_auth(publish_key))
    assert response.status_code == 405
