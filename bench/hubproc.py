"""A hub in its own process for benchmarks, with a fresh database, keys and a token minter."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
from redis.asyncio import Redis
from sqlalchemy.engine import make_url

from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.migrate import upgrade_head
from notifyhub.domain.auth import Scope
from notifyhub.services import apikeys
from notifyhub.services.tokens import TokenService
from notifyhub.settings import Settings

REDIS_URL = os.environ.get("NOTIFYHUB_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
SERVER_URL = os.environ.get(
    "NOTIFYHUB_BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)


def use_stores(redis_url: str, server_url: str) -> None:
    """Run every hub from now on against these stores (`python -m bench --embedded`)."""
    global REDIS_URL, SERVER_URL
    REDIS_URL, SERVER_URL = redis_url, server_url


def rss_kib(pid: int) -> int:
    """A process's resident memory (VmRSS); raises OSError once it is gone."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class BenchHub:
    base_url: str
    pid: int
    settings: Settings
    admin_key: str
    publish_key: str
    consume_key: str
    tokens: TokenService
    restart: Callable[..., Awaitable[int]] = field(repr=False, default=lambda **_: _never())
    """Restart the process (a fresh heap); `env=` sets (a value) or unsets (None) its
    environment variables from then on."""

    async def vacuum(self) -> None:
        """VACUUM ANALYZE the run's database, as autovacuum does within a minute of a bulk
        write. A group read right after its 100k member rows went in costs the index-only
        scan a heap visit per row (measured: 0.35 s instead of 0.06 s for 100k members),
        which no group that has existed for a minute pays."""
        conn = await asyncpg.connect(str(self.settings.database_url).replace("+asyncpg", ""))
        try:
            await conn.execute("VACUUM (ANALYZE)")
        finally:
            await conn.close()

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    @classmethod
    @contextlib.asynccontextmanager
    async def start(cls, prefix: str) -> AsyncIterator[BenchHub]:
        async with cls.start_many(prefix) as hubs:
            yield hubs[0]

    @classmethod
    @contextlib.asynccontextmanager
    async def start_many(
        cls, prefix: str, *, redis_url: str | None = None, processes: int = 1
    ) -> AsyncIterator[list[BenchHub]]:
        """`processes` hub processes on one database and one Redis (key prefix); the
        bench's Redis unless `redis_url` names another."""
        redis_url = redis_url or REDIS_URL
        db_name = f"notifyhub_bench_{secrets.token_hex(4)}"
        admin_dsn = SERVER_URL.replace("+asyncpg", "")
        conn = await asyncpg.connect(admin_dsn)
        await conn.execute(f'CREATE DATABASE "{db_name}"')
        # (an embedded server's URL names its socket folder in the query: no string cuts)
        database_url = make_url(SERVER_URL).set(database=db_name).render_as_string(False)
        settings = Settings(
            redis_url=redis_url,
            database_url=database_url,
            redis_prefix=prefix,
            jwt_secret="bench-" + secrets.token_hex(32),  # type: ignore[arg-type]
        )
        try:
            await asyncio.to_thread(upgrade_head, database_url)
            keys = await _keys(database_url)
            async with contextlib.AsyncExitStack() as stack:
                hubs = [
                    cls._of(await stack.enter_async_context(_process(settings)), settings, keys)
                    for _ in range(processes)
                ]
                yield hubs
        finally:
            if redis_url == REDIS_URL:  # a private Redis (the bench cluster) goes whole
                await _drop_keys(prefix)
            await conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
            await conn.close()

    @classmethod
    def _of(cls, process: _Process, settings: Settings, keys: tuple[str, str, str]) -> BenchHub:
        hub = cls(process.base_url, process.pid, settings, *keys, TokenService(settings))

        async def restart(env: Mapping[str, str | None] | None = None) -> int:
            for name, value in (env or {}).items():
                if value is None:
                    process.env.pop(name, None)
                else:
                    process.env[name] = value
            hub.pid = await process.restart()
            return hub.pid

        hub.restart = restart
        return hub


async def _keys(database_url: str) -> tuple[str, str, str]:
    engine = create_engine(database_url)
    try:
        async with create_sessionmaker(engine)() as session, session.begin():
            admin = await apikeys.create_key(
                session, name="bench-admin", scope=Scope.ADMIN, tenant=None
            )
            publish = await apikeys.create_key(
                session, name="bench-pub", scope=Scope.PUBLISH, tenant=None
            )
            consume = await apikeys.create_key(
                session, name="bench-consume", scope=Scope.CONSUME, tenant=None
            )
        return admin, publish, consume
    finally:
        await engine.dispose()


class _Process:
    """The hub's OS process; `restart` gives a fresh heap for memory measurements."""

    def __init__(self, settings: Settings) -> None:
        assert settings.jwt_secret is not None
        self.base_url = f"http://127.0.0.1:{_free_port()}"
        self.env = {
            **os.environ,
            "NOTIFYHUB_REDIS_URL": str(settings.redis_url),
            "NOTIFYHUB_DATABASE_URL": str(settings.database_url),
            "NOTIFYHUB_REDIS_PREFIX": settings.redis_prefix,
            "NOTIFYHUB_JWT_SECRET": settings.jwt_secret.get_secret_value(),
            "NOTIFYHUB_LIMITS__STREAMS_PER_USER": "100000",
            "NOTIFYHUB_DELIVERIES__ALLOW_NETWORKS": '["127.0.0.1/32"]',
        }
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self) -> int:
        port = self.base_url.rsplit(":", 1)[1]
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "notifyhub", "serve", "--port", port, env=self.env
        )
        await _wait_ready(self.base_url)
        return self.proc.pid

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await asyncio.wait_for(self.proc.wait(), 15)

    async def restart(self) -> int:
        await self.stop()
        return await self.start()


@contextlib.asynccontextmanager
async def _process(settings: Settings) -> AsyncIterator[_Process]:
    process = _Process(settings)
    await process.start()
    try:
        yield process
    finally:
        await process.stop()


async def _never() -> int:
    raise RuntimeError("not started")


async def _wait_ready(base_url: str) -> None:
    async with httpx.AsyncClient() as client, asyncio.timeout(60):
        while True:
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(f"{base_url}/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.2)


async def _drop_keys(prefix: str) -> None:
    redis = Redis.from_url(REDIS_URL)
    try:
        batch: list[bytes] = []
        async for key in redis.scan_iter(match=prefix + "*", count=5000):
            batch.append(key)
            if len(batch) >= 5000:
                await redis.unlink(*batch)
                batch.clear()
        if batch:
            await redis.unlink(*batch)
    finally:
        await redis.aclose()
