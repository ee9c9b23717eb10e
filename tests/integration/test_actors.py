"""Actors: a name and an avatar beside the reference, validated at the edge (https, or a
small raster data: URL), kept in every copy and in the stream."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from support.deliveries import unique
from support.sse import open_stream

BASE = "/v1/me/notifications"
PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(40)).decode()


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_an_actor_with_name_and_avatar_reaches_the_list_and_the_stream(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    user = unique("act-or")
    token = make_token(user)
    ana = {"id": "ana", "name": "Ana Lima", "avatar_url": "https://cdn.example/ana.png"}
    async with open_stream(hub.client, token) as stream:
        body = {"recipients": {"users": [user]}, "title": "Ana commented", "actor": ana}
        sent = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
        assert sent.status_code == 202, sent.text
        event, _ = await stream.until("notification")
    assert event.data["actor"] == {**ana, "type": "user"}
    bot = {"type": "bot", "id": "ci", "avatar_url": PNG}
    body = {"recipients": {"users": [user]}, "title": "Build failed", "actor": bot}
    assert (
        await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    ).status_code == 202
    items = (await hub.client.get(BASE, headers=_auth(token))).json()["items"]
    assert [i["actor"] for i in items] == [{**bot, "name": None}, {**ana, "type": "user"}]
    mine = (await hub.client.get(f"{BASE}?actor=ana", headers=_auth(token))).json()["items"]
    assert [i["title"] for i in mine] == ["Ana commented"]


@pytest.mark.parametrize(
    ("actor", "needle"),
    [
        ({"id": "a", "avatar_url": "http://cdn.example/a.png"}, "https://"),
        ({"id": "a", "avatar_url": "javascript:alert(1)"}, "https://"),
        ({"id": "a", "avatar_url": "https://x.example/a b.png"}, "https://"),
        ({"id": "a", "avatar_url": 'https://x.example/"onerror="x'}, "https://"),
        ({"id": "a", "avatar_url": "data:image/svg+xml;base64,PHN2Zz4="}, "png|jpeg|gif|webp"),
        ({"id": "a", "avatar_url": "data:image/png;base64," + "A" * 3000}, "2048 characters"),
        ({"id": "a", "name": ""}, "actor.name"),
        ({"id": "a", "name": "x" * 101}, "actor.name"),
        ({"name": "no id"}, "actor.id"),
        ({"id": "a", "face": "🙂"}, "actor.face"),
    ],
)
async def test_bad_actors_are_refused_and_nothing_is_stored(
    hub: Any, publish_key: str, make_token: Any, actor: dict[str, Any], needle: str
) -> None:
    user = unique("act-or-bad")
    body = {"recipients": {"users": [user]}, "title": "t", "actor": actor}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert needle in response.text
    assert (await hub.client.get(BASE, headers=_auth(make_token(user)))).json()["items"] == []
