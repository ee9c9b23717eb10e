"""Start-up warnings about Redis settings that lose or evict data, on throwaway servers."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis

from notifyhub.api.app import create_app
from notifyhub.settings import Settings
from notifyhub.store.client import check_durability

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path)]
    process = subprocess.Popen([*command, *args], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            SyncRedis.from_url(url).ping()
            return process, url
        except Exception:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise
            time.sleep(0.05)


@pytest.fixture
def risky_redis(tmp_path: Path) -> Iterator[str]:
    """No AOF, no snapshots, evicts under memory pressure."""
    process, url = _start(
        tmp_path, "--appendonly", "no", "--save", "", "--maxmemory-policy", "allkeys-lru"
    )
    yield url
    process.terminate()
    process.wait(10)


@pytest.fixture
def locked_down_redis(tmp_path: Path) -> Iterator[str]:
    """CONFIG disabled, as on many managed services."""
    process, url = _start(tmp_path, "--rename-command", "CONFIG", "")
    yield url
    process.terminate()
    process.wait(10)


async def test_risky_settings_are_warned_about(
    risky_redis: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = Redis.from_url(risky_redis)
    try:
        with caplog.at_level(logging.WARNING, logger="notifyhub.store.client"):
            warnings = await check_durability(client)
    finally:
        await client.aclose()
    assert len(warnings) == 2
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("without persistence" in m for m in logged)
    assert any("allkeys-lru" in m for m in logged)


async def test_safe_settings_are_quiet(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    process, url = _start(tmp_path, "--appendonly", "yes", "--maxmemory-policy", "noeviction")
    client = Redis.from_url(url)
    try:
        with caplog.at_level(logging.WARNING, logger="notifyhub.store.client"):
            assert await check_durability(client) == []
    finally:
        await client.aclose()
        process.terminate()
        process.wait(10)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_config_disabled_is_tolerated(
    locked_down_redis: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = Redis.from_url(locked_down_redis)
    try:
        with caplog.at_level(logging.INFO, logger="notifyhub.store.client"):
            assert await check_durability(client) == []
    finally:
        await client.aclose()
    assert any("cannot read Redis CONFIG" in r.getMessage() for r in caplog.records)


async def test_the_hub_warns_at_start_up(
    risky_redis: str, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(settings.model_copy(update={"redis_url": risky_redis}))
    with caplog.at_level(logging.WARNING, logger="notifyhub.store.client"):
        async with app.router.lifespan_context(app):
            pass
    assert any("without persistence" in r.getMessage() for r in caplog.records)
