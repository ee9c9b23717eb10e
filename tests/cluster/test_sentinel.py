"""The hub through a `redis+sentinel://` URL: it works, and keeps working (streams resume,
ingest resumes) after Sentinel promotes the replica of a killed master."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from integration.test_stream import open_stream
from notifyhub.settings import Settings
from support.cluster import LocalSentinel, cluster_settings, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def local_sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSentinel]:
    sentinel = LocalSentinel(tmp_path_factory.mktemp("sentinel"))
    sentinel.start()
    yield sentinel
    sentinel.stop()


@pytest.fixture
def settings(local_sentinel: LocalSentinel, database_url: str) -> Settings:
    return cluster_settings(local_sentinel.url, database_url, redis_wait_replicas=1)


async def _publish(hub: Any, key: str, user: str, title: str) -> str:
    """Retry until acknowledged: during the failover the hub answers 503 for a moment."""
    body = {"recipients": {"users": [user]}, "title": title}
    async with asyncio.timeout(30):
        while True:
            with contextlib.suppress(httpx.HTTPError):
                response = await hub.client.post(
                    "/v1/notifications", json=body, headers={"Authorization": f"Bearer {key}"}
                )
                if response.status_code == 202:
                    return str(response.json()["id"])
            await asyncio.sleep(0.2)


async def test_hub_through_sentinel_survives_a_failover(
    hub: Any, publish_key: str, make_token: Any, local_sentinel: LocalSentinel
) -> None:
    token = make_token("sentinel-user")
    async with open_stream(hub, token) as events:
        assert (await events.next()).event == "counts"
        before = await _publish(hub, publish_key, "sentinel-user", "before")
        event, _ = await events.until("notification")
        assert event.data["id"] == before
        last_id = event.id
    old_port = local_sentinel.master.port
    await asyncio.to_thread(local_sentinel.master.kill)
    await asyncio.to_thread(
        wait_until, lambda: local_sentinel.current_master_port() != old_port, "promotion"
    )
    after = await _publish(hub, publish_key, "sentinel-user", "after")
    assert last_id is not None
    async with open_stream(hub, token, **{"Last-Event-ID": last_id}) as events:
        event, _ = await events.until("notification", timeout=10)
        assert event.data["id"] == after
    listing = await hub.client.get(
        "/v1/me/notifications", headers={"Authorization": f"Bearer {token}"}
    )
    assert [item["id"] for item in listing.json()["items"]] == [after, before]
