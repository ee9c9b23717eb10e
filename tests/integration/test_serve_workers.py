"""`notifyhub serve --workers 2`: two hub processes on one port; streams and ingest work
whichever process a connection lands on, and SIGTERM stops them all."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from integration.test_cross_process import _free_port, _wait_ready, hub_env, stream

pytestmark = pytest.mark.slow


async def _pubsub_listeners(redis: Redis, name: str) -> int:
    return sum(1 for client in await redis.client_list() if client["name"] == name)


async def test_two_workers_share_the_port_and_the_doorbells(
    settings: Any, redis: Redis, publish_key: str, make_token: Any, tmp_path: Path
) -> None:
    port = _free_port()
    env = hub_env(settings)
    cli = Path(sys.executable).parent / "notifyhub"
    command = [str(cli), "serve", "--port", str(port), "--workers", "2"]
    with (tmp_path / "serve.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(*command, env=env, stdout=log, stderr=log)
    base_url = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(base_url)
        name = f"notifyhub-pubsub-{settings.redis_prefix}events"
        async with asyncio.timeout(30):
            while await _pubsub_listeners(redis, name) < 2:
                await asyncio.sleep(0.1)
        users = [f"w-{i}" for i in range(6)]
        readers = [stream(base_url, make_token(user)) for user in users]
        events = [await reader.__aenter__() for reader in readers]
        try:
            for reader in events:
                assert (await reader.next()).event == "counts"
            async with httpx.AsyncClient(base_url=base_url) as client:
                body = {"recipients": {"users": users}, "title": "both workers"}
                headers = {"Authorization": f"Bearer {publish_key}"}
                sent = await client.post("/v1/notifications", json=body, headers=headers)
            assert sent.status_code == 202
            for reader in events:
                event, _ = await reader.until("notification")
                assert event.data["id"] == sent.json()["id"]
        finally:
            for reader in readers:
                await reader.__aexit__(None, None, None)
    finally:
        proc.send_signal(signal.SIGTERM)
        exit_code = await asyncio.wait_for(proc.wait(), 30)
    assert exit_code == 0
    assert await _pubsub_listeners(redis, name) == 0
