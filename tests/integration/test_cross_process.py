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


async def test_a_served_hub_ends_streams_whose_clients_leave_while_opening(
    settings: Any, make_token: Any, tmp_path: Path
) -> None:
    """`notifyhub serve` runs on uvloop, whose closed socket refuses `setsockopt` with a
    ValueError (asyncio's, with an OSError): a client gone before its stream's 200 was an
    "unhandled error" with a traceback, and its stream stayed attached. Seen on a 16-core
    machine when the bench's generators stopped mid-open."""
    log_path = tmp_path / "hub.log"
    leavers = 40
    with hub_process(settings, log_path) as base_url:
        await _wait_ready(base_url)
        host, port = base_url.removeprefix("http://").split(":")
        for n in range(leavers):
            _, writer = await asyncio.open_connection(host, int(port))
            token = make_token(f"served-leaver-{n}")
            writer.write(
                f"GET /v1/me/stream HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {token}"
                "\r\n\r\n".encode()
            )
            await writer.drain()
            writer.close()
            await writer.wait_closed()
        async with httpx.AsyncClient(base_url=base_url) as client, asyncio.timeout(10):
            while True:
                metrics = (await client.get("/metrics")).text
                left = _sample(metrics, 'notifyhub_streams_dropped_total{reason="client_left"}')
                if left == leavers and _sample(metrics, "notifyhub_streams_open") == 0:
                    break
                await asyncio.sleep(0.05)
    assert "unhandled error" not in log_path.read_text()


def _sample(metrics: str, name: str) -> float:
    """One sample of the hub's `/metrics` (0 when absent)."""
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
