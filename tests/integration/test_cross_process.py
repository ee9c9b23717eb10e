"""Two real hub processes on one Redis: a stream on one gets what is POSTed to the other."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.sse import EventReader

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hub_env(settings: Any) -> dict[str, str]:
    """The environment of a `notifyhub serve` subprocess on this test's servers."""
    return {
        **os.environ,
        "NOTIFYHUB_REDIS_URL": settings.redis_url,
        "NOTIFYHUB_DATABASE_URL": settings.database_url,
        "NOTIFYHUB_REDIS_PREFIX": settings.redis_prefix,
        "NOTIFYHUB_JWT_SECRET": settings.jwt_secret.get_secret_value(),
    }


@contextlib.contextmanager
def hub_process(settings: Any, log_path: Path) -> Iterator[str]:
    port = _free_port()
    env = hub_env(settings)
    cli = Path(sys.executable).parent / "notifyhub"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(cli), "serve", "--port", str(port)], env=env, stdout=log, stderr=log
        )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _wait_ready(base_url: str) -> None:
    async with httpx.AsyncClient() as client, asyncio.timeout(30):
        while True:
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(f"{base_url}/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def stream(base_url: str, token: str) -> AsyncIterator[EventReader]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(timeout=10) as client,
        client.stream("GET", f"{base_url}/v1/me/stream", headers=headers) as response,
    ):
        assert response.status_code == 200
        yield EventReader(response)


async def test_stream_on_one_process_gets_post_to_other(
    settings: Any, publish_key: str, make_token: Any, tmp_path: Path
) -> None:
    with (
        hub_process(settings, tmp_path / "first.log") as first,
        hub_process(settings, tmp_path / "second.log") as second,
    ):
        await asyncio.gather(_wait_ready(first), _wait_ready(second))
        async with stream(first, make_token("xp-user")) as events:
            assert (await events.next()).event == "counts"
            async with httpx.AsyncClient() as client:
                body = {"recipients": {"users": ["xp-user"]}, "title": "across"}
                headers = {"Authorization": f"Bearer {publish_key}"}
                response = await client.post(
                    f"{second}/v1/notifications", json=body, headers=headers
                )
            assert response.status_code == 202
            event, _ = await events.until("notification")
            assert event.data["id"] == response.json()["id"]
