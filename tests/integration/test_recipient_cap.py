"""`limits.max_recipients` bounds a publish's users however they are named: one group
alone (read page by page, not deduped: its members are unique) or groups with users and
topics (deduped as they come); each user counts once."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from notifyhub.settings import Limits, Settings

CAP = 3


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _group(hub: Any, admin_key: str, members: list[str]) -> str:
    name = f"cap-{uuid.uuid4().hex[:8]}"
    admin = _auth(admin_key)
    assert (await hub.client.put(f"/v1/admin/groups/{name}", headers=admin)).status_code == 201
    added = await hub.client.post(
        f"/v1/admin/groups/{name}/members", json={"add": members}, headers=admin
    )
    assert added.status_code < 300, added.text
    return name


async def test_one_group_past_the_cap_is_refused_and_sends_nothing(
    settings: Settings,
    start_hub: Callable[[Settings], AbstractAsyncContextManager[Any]],
    admin_key: str,
    publish_key: str,
    make_token: Any,
) -> None:
    capped = settings.model_copy(update={"limits": Limits(max_recipients=CAP)})
    async with start_hub(capped) as hub:
        at_cap = await _group(hub, admin_key, ["c1", "c2", "c3"])
        past = await _group(hub, admin_key, ["p1", "p2", "p3", "p4"])
        sent = await hub.client.post(
            "/v1/notifications",
            json={"recipients": {"groups": [at_cap]}, "title": "three"},
            headers=_auth(publish_key),
        )
        assert sent.status_code == 202, sent.text
        assert sent.json()["recipients"] == CAP

        refused = await hub.client.post(
            "/v1/notifications",
            json={"recipients": {"groups": [past]}, "title": "four"},
            headers=_auth(publish_key),
        )
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert f"more than {CAP} users" in refused.json()["detail"]
        listed = await hub.client.get("/v1/me/notifications", headers=_auth(make_token("p1")))
        assert listed.status_code == 200 and listed.json()["items"] == []


async def test_a_user_reached_twice_counts_once_against_the_cap(
    settings: Settings,
    start_hub: Callable[[Settings], AbstractAsyncContextManager[Any]],
    admin_key: str,
    publish_key: str,
) -> None:
    """Three users, each named directly and through both groups: within a cap of 3."""
    capped = settings.model_copy(update={"limits": Limits(max_recipients=CAP)})
    async with start_hub(capped) as hub:
        first = await _group(hub, admin_key, ["d1", "d2"])
        second = await _group(hub, admin_key, ["d2", "d3"])
        recipients = {"users": ["d3", "d1"], "groups": [first, second]}
        sent = await hub.client.post(
            "/v1/notifications",
            json={"recipients": recipients, "title": "once each"},
            headers=_auth(publish_key),
        )
        assert sent.status_code == 202, sent.text
        assert sent.json()["recipients"] == CAP

        recipients = {"users": ["d4"], "groups": [first, second]}
        refused = await hub.client.post(
            "/v1/notifications",
            json={"recipients": recipients, "title": "one more"},
            headers=_auth(publish_key),
        )
        assert refused.status_code == 422, refused.text
        assert f"more than {CAP} users" in refused.json()["detail"]
