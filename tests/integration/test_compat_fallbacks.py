"""Outside the versions its fast paths are tested with (notifyhub/_compat/), the hub still
serves streams and publishes: uvicorn's h11 instead of the hub's own protocol, asyncio's
deques, redis-py's routing by keys."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from integration.test_stream import no_streams_left, open_stream
from notifyhub._compat import _httptools
from notifyhub._compat import asyncio as compat_asyncio
from notifyhub._compat import uvicorn as compat_uvicorn
from notifyhub.api import protocol
from notifyhub.settings import Settings
from support.rawhttp import exchange, request_head

Hub = Callable[[Settings], AbstractAsyncContextManager[Any]]


def _plain_protocol(monkeypatch: pytest.MonkeyPatch) -> type[Any] | str:
    """What `api/protocol.py` gets outside the tested uvicorn versions."""
    monkeypatch.setattr(compat_uvicorn, "_LEAN", None)
    return compat_uvicorn.capped_protocol(
        max_head_bytes=protocol.MAX_HEAD_BYTES,
        refusal=protocol.REFUSAL,
        linger_s=protocol.LINGER_S,
        linger_bytes=protocol.LINGER_BYTES,
        connection_key="notifyhub.connection",
    )


@pytest.fixture
async def plain_hub(
    settings: Settings, start_hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    http = _plain_protocol(monkeypatch)
    assert http == "h11"
    monkeypatch.setattr(protocol, "HubHttpProtocol", http)
    async with start_hub(settings) as running:
        assert running.server.config.http == "h11"
        yield running


async def _live_then_left(hub: Any, publish_key: str, make_token: Any, user: str) -> None:
    """A notification arrives live on an open stream; once its client leaves, the hub
    holds no stream."""
    auth = {"Authorization": f"Bearer {publish_key}"}
    body = {"recipients": {"users": [user]}, "title": "ping"}
    async with open_stream(hub, make_token(user)) as stream:
        assert (await stream.next()).event == "counts"
        sent = await hub.client.post("/v1/notifications", json=body, headers=auth)
        assert sent.status_code == 202
        event, _ = await stream.until("notification")
        assert event.data["id"] == sent.json()["id"]
    await no_streams_left(hub)


async def test_under_h11_streams_get_their_notifications(
    plain_hub: Any, publish_key: str, make_token: Any
) -> None:
    await _live_then_left(plain_hub, publish_key, make_token, "plain-http")


async def test_under_h11_an_oversized_head_is_still_refused(
    plain_hub: Any, make_token: Any
) -> None:
    """h11's own cap refuses it (a 400, or a reset: it closes with the rest unread)."""
    head = request_head("/v1/me/notifications", make_token("u"), 4 * protocol.MAX_HEAD_BYTES)
    try:
        answer = await exchange(plain_hub.base_url, head)
    except (ConnectionResetError, BrokenPipeError):  # h11 closes with the rest unread
        answer = b"reset"
    assert answer == b"reset" or answer.startswith(b"HTTP/1.1 400 ")  # not a 431 under h11
    assert (await plain_hub.client.get("/healthz")).status_code == 200


async def test_with_asyncio_deques_streams_get_their_notifications(
    hub: Any, publish_key: str, make_token: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_httptools, "lighten", compat_asyncio._leave)
    await _live_then_left(hub, publish_key, make_token, "plain-asyncio")
