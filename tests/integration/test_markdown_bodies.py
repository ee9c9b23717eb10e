"""Markdown bodies at the edge: the subset is kept as sent with `body_format`, anything
outside it (HTML, script, non-http(s) links, reference links) is a precise 422 and
nothing is stored; text bodies are never checked for markdown."""

from __future__ import annotations

from typing import Any

import pytest

from support.deliveries import unique

BASE = "/v1/me/notifications"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_markdown_body_is_kept_with_its_format(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    user = unique("md")
    body = "Deploy **v2.3**: run `make ship`, see [runbook](https://wiki.example/r)\n- a\n- b"
    for sent in (
        {"body": body, "body_format": "markdown"},
        {"body": "<b>not markdown</b> a<b"},  # text: shown as text, never checked
    ):
        request = {"recipients": {"users": [user]}, "title": "t", **sent}
        response = await hub.client.post(
            "/v1/notifications", json=request, headers=_auth(publish_key)
        )
        assert response.status_code == 202, response.text
    items = (await hub.client.get(BASE, headers=_auth(make_token(user)))).json()["items"]
    assert [(i["body_format"], i["body"]) for i in items] == [
        ("text", "<b>not markdown</b> a<b"),
        ("markdown", body),
    ]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("hi <script>alert(1)</script>", "may not contain HTML (found '<script>aler')"),
        ("<img src=x onerror=alert(1)>", "may not contain HTML"),
        ("a<b", "may not contain HTML"),
        ("[x](javascript:alert(1))", "links must be http(s) URLs (found 'javascript:alert(1')"),
        ("[x](  JaVaScRiPt:alert(1))", "links must be http(s) URLs"),
        ("[x](/relative)", "links must be http(s) URLs"),
        ("![x](https://example.com/a.png)", None),  # an image: not in the subset, but safe
        ("[x][r]\n\n[r]: https://example.com", "reference links"),
        ("see data:text/html;base64,PHNjcmlwdD4=", "may not name a data: URL"),
    ],
)
async def test_markdown_outside_the_subset_is_refused_and_nothing_stored(
    hub: Any, publish_key: str, make_token: Any, body: str, needle: str | None
) -> None:
    user = unique("md-bad")
    request = {
        "recipients": {"users": [user]},
        "title": "t",
        "body": body,
        "body_format": "markdown",
    }
    response = await hub.client.post("/v1/notifications", json=request, headers=_auth(publish_key))
    items = (await hub.client.get(BASE, headers=_auth(make_token(user)))).json()["items"]
    if needle is None:
        assert response.status_code == 202 and len(items) == 1
        return
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert needle in response.json()["detail"]
    assert items == []
