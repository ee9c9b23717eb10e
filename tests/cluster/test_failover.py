"""A master dies while streams are open: no acknowledged notification is lost for a
stream that resumes from its Last-Event-ID.

A cluster of its own (the kill changes its topology). Deliveries WAIT for one replica
(`redis_wait_replicas=1`): with asynchronous replication alone a master can die holding
acknowledged writes its replica never saw, which no client can get back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from notifyhub.settings import Settings
from notifyhub.store.keys import Keys
from support.cluster import LocalCluster, cluster_settings, wait_until
from support.sse import EventReader

pytestmark = pytest.mark.slow

USERS = [f"fo-{i}" for i in range(6)]
SENDS = 40
KILL_AFTER = 12
PER_CONNECTION = 7


@pytest.fixture
def failover_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("failover"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def settings(failover_cluster: LocalCluster, database_url: str) -> Settings:
    return cluster_settings(failover_cluster.url, database_url, redis_wait_replicas=1)


class Follower:
    """One user's stream, reopened from its last event id whenever it ends, and every
    `PER_CONNECTION` notifications anyway (so resumes happen around the kill too)."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url, self.token = base_url, token
        self.ids: list[str] = []
        self.last_event_id: str | None = None
        self.resumes = 0
        self.resets = 0

    async def run(self) -> None:
        while True:
            with contextlib.suppress(httpx.HTTPError, EOFError, TimeoutError):
                await self._follow()
            self.resumes += 1
            await asyncio.sleep(0.2)

    async def _follow(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = self.last_event_id
        url = f"{self.base_url}/v1/me/stream"
        async with (
            httpx.AsyncClient(timeout=10) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            if response.status_code != 200:
                return
            events = EventReader(response)
            for _ in range(PER_CONNECTION):
                await self._next_notification(events)

    async def _next_notification(self, events: EventReader) -> None:
        while True:
            event = await events.next(timeout=30)
            if event.event == "reset":
                self.resets += 1
            if event.id is not None:
                self.last_event_id = event.id
            if event.event == "notification":
                self.ids.append(event.data["id"])
                return


async def _publish(hub: Any, key: str, n: int) -> str | None:
    """The notification's id if the hub acknowledged it (202), else None."""
    body = {"recipients": {"users": USERS}, "title": f"n{n}"}
    with contextlib.suppress(httpx.HTTPError):
        response = await hub.client.post(
            "/v1/notifications", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        if response.status_code == 202:
            return str(response.json()["id"])
    return None


async def test_master_failover_loses_no_event_for_resumed_streams(
    hub: Any, publish_key: str, make_token: Any, failover_cluster: LocalCluster, settings: Settings
) -> None:
    keys = Keys(settings.redis_prefix)
    victim = failover_cluster.master_of(keys.inbox_list("default", USERS[0])[0])
    followers = [Follower(hub.base_url, make_token(user)) for user in USERS]
    tasks = [asyncio.create_task(f.run()) for f in followers]
    try:
        await asyncio.sleep(0.5)  # every stream open and subscribed
        acked: list[str] = []
        for n in range(SENDS):
            if n == KILL_AFTER:
                await asyncio.to_thread(victim.kill)
            if (found := await _publish(hub, publish_key, n)) is not None:
                acked.append(found)
            await asyncio.sleep(0.05)
        await asyncio.to_thread(wait_until, failover_cluster.healthy, "failover")
        async with asyncio.timeout(30):
            while any(not set(acked) <= set(f.ids) for f in followers):
                await asyncio.sleep(0.1)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert len(acked) >= SENDS // 2  # the hub kept accepting through the failover
    assert hub.app_state["metrics"].pubsub_reconnects_total._value.get() >= 1
    for follower in followers:
        assert set(acked) <= set(follower.ids)
        assert follower.resets == 0
        # Each connection ends after PER_CONNECTION notifications, so the streams did
        # resume through the failover: how often follows from what was delivered (a
        # publish refused during the failover is never streamed).
        assert follower.resumes >= len(acked) // PER_CONNECTION >= 2
    assert victim.proc is not None and victim.proc.poll() is not None
