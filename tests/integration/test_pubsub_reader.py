"""The hub reads its doorbells straight from the subscribed socket (`RawMessages`,
_compat/redis.py), or through redis-py's `get_message` when it cannot (`PolledMessages`):
either way a stream gets its user's notification live."""

from __future__ import annotations

from typing import Any

import pytest

from integration.test_stream import open_stream
from notifyhub._compat import redis as compat_redis
from notifyhub._compat.redis import PolledMessages, RawMessages


async def _a_live_notification(hub: Any, publish_key: str, make_token: Any, user: str) -> None:
    async with open_stream(hub, make_token(user)) as stream:
        assert (await stream.next()).event == "counts"
        body = {"recipients": {"users": [user]}, "title": "ping"}
        auth = {"Authorization": f"Bearer {publish_key}"}
        sent = await hub.client.post("/v1/notifications", json=body, headers=auth)
        assert sent.status_code == 202
        event, _ = await stream.until("notification")
    assert event.data["id"] == sent.json()["id"]


class TestRaw:
    @pytest.fixture(autouse=True)
    def reads(self, monkeypatch: pytest.MonkeyPatch) -> list[int]:
        """How many replies each raw read returned (patched before the hub starts)."""
        counted: list[int] = []
        read = RawMessages.read

        async def counting(self: RawMessages, timeout_s: float) -> list[Any]:
            replies = await read(self, timeout_s)
            counted.append(len(replies))
            return replies

        monkeypatch.setattr(RawMessages, "read", counting)
        return counted

    async def test_doorbells_are_read_from_the_socket(
        self, hub: Any, publish_key: str, make_token: Any, reads: list[int]
    ) -> None:
        await _a_live_notification(hub, publish_key, make_token, "raw-reader")
        assert sum(reads) >= 2  # the subscribe confirmation(s), then the doorbell


class TestPolled:
    @pytest.fixture(autouse=True)
    def no_raw_reads(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # As outside the redis-py versions the raw reader is tested with (or without hiredis).
        monkeypatch.setattr(compat_redis, "_NOT_ENOUGH_DATA", None)
        polled = PolledMessages.read
        self.polled = 0

        async def counting(reader: Any, timeout_s: float) -> list[Any]:
            self.polled += 1
            return await polled(reader, timeout_s)

        monkeypatch.setattr(PolledMessages, "read", counting)

    async def test_without_the_raw_reader_doorbells_are_polled(
        self, hub: Any, publish_key: str, make_token: Any
    ) -> None:
        await _a_live_notification(hub, publish_key, make_token, "polled-reader")
        assert self.polled >= 2
