"""notifyhub-client's user-token operations against a real hub: `read_all` marks the
user's unread notifications read, or only a view's (tab's), or a category's; a view the
user does not have is the hub's 422, as a `ValidationError`; `archive_all` archives
alike."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import pytest

from notifyhub_client import AsyncClient, ValidationError

BASE = "/v1/me/notifications"


async def _unread(hub: Any, token: str, status: str = "unread") -> set[str]:
    page = await hub.client.get(
        f"{BASE}?status={status}", headers={"Authorization": f"Bearer {token}"}
    )
    assert page.status_code == 200, page.text
    return {item["id"] for item in page.json()["items"]}


async def _with_ops_view(hub: Any, make_token: Callable[..., str], user: str) -> str:
    """The user's token, the user given a view `ops` (tag ops)."""
    token = make_token(user)
    own = await hub.client.put(
        "/v1/me/views/ops",
        json={"filter": {"tags_any": ["ops"]}},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert own.status_code == 201, own.text
    return token


async def test_read_all_marks_a_views_notifications_only(
    hub: Any, publish_key: str, make_token: Callable[..., str]
) -> None:
    user = f"py-read-{secrets.token_hex(4)}"
    token = await _with_ops_view(hub, make_token, user)
    async with AsyncClient(hub.base_url, publish_key) as client:
        ops = (await client.notify("Disk full", users=[user], tags=["ops"])).id
        billing = (await client.notify("Invoice", users=[user], category="billing")).id
        chat = (await client.notify("Hello", users=[user])).id

        with pytest.raises(ValidationError) as unknown:
            await client.read_all(token, view="nope")
        assert unknown.value.status == 422 and "nope" in unknown.value.detail
        assert await _unread(hub, token) == {ops, billing, chat}

        assert await client.read_all(token, view="ops") == 1
        assert await _unread(hub, token) == {billing, chat}
        assert await client.read_all(token, category="billing") == 1
        assert await client.read_all(token) == 1
    assert await _unread(hub, token) == set()


async def test_archive_all_archives_a_views_notifications_only(
    hub: Any, publish_key: str, make_token: Callable[..., str]
) -> None:
    user = f"py-archive-{secrets.token_hex(4)}"
    token = await _with_ops_view(hub, make_token, user)
    async with AsyncClient(hub.base_url, publish_key) as client:
        ops = (await client.notify("Disk full", users=[user], tags=["ops"])).id
        chat = (await client.notify("Hello", users=[user])).id
        with pytest.raises(ValidationError):
            await client.archive_all(token, view="nope")
        assert await client.archive_all(token, view="ops") == 1
        assert await _unread(hub, token, "archived") == {ops}
        assert await _unread(hub, token, "all") == {chat}
        assert await client.archive_all(token) == 1
    assert await _unread(hub, token, "all") == set()
