"""Shared fixtures: real Redis and PostgreSQL (this machine's, or embedded ones), a fresh
database per run, a Redis key prefix per test, and a real uvicorn server per test."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.api.app import create_app
from notifyhub.api.deps import State
from notifyhub.api.fastpath import HubApp
from notifyhub.api.protocol import head_limits
from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.db.migrate import upgrade_head
from notifyhub.domain.auth import Scope
from notifyhub.embedded import EmbeddedServers
from notifyhub.process.server import HubServer
from notifyhub.services import apikeys
from notifyhub.services.tokens import TokenService
from notifyhub.settings import Settings
from support import optional
from support.database import asyncpg_dsn, with_database
from support.heap import forget_apps
from support.processes import server_directory
from support.receiver import Receiver
from support.smtp import Smtp, smtp_server
from support.tls import TEST_TLS

RUN_ID = secrets.token_hex(4)


def pytest_report_header() -> list[str]:
    """Once, at the start: which optional programs are missing, and how to install them."""
    return optional.header()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport() -> Iterator[None]:
    outcome = yield
    optional.fold(outcome.get_result())  # type: ignore[attr-defined]


_counter = itertools.count()


@dataclass(frozen=True)
class Backends:
    redis_url: str
    server_url: str  # the PostgreSQL server's maintenance database (SQLAlchemy asyncpg form)


@pytest.fixture(scope="session")
def backends() -> Iterator[Backends]:
    """The machine's Redis and PostgreSQL when both NOTIFYHUB_TEST_* URLs name them, else
    embedded ones (one pair per xdist worker) in a directory of their own."""
    redis_url = os.environ.get("NOTIFYHUB_TEST_REDIS_URL")
    database_url = os.environ.get("NOTIFYHUB_TEST_DATABASE_URL")
    if redis_url and database_url:
        yield Backends(redis_url, database_url)
        _drop_run_keys(redis_url)
        return
    with server_directory("nh-embedded-") as root:
        servers = EmbeddedServers.start(root, database="postgres")
        try:
            yield Backends(servers.redis_url, servers.database_url)
        finally:
            servers.stop()


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported lives as long as the run: frozen, as a hub freezes what
    its start-up built (process/gc.py), so no full collection scans it again."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _forget_apps() -> Iterator[None]:
    yield
    forget_apps()


@pytest.fixture(scope="session")
def run_id() -> str:
    """This run's id: Redis key prefixes under `nhtest:<run_id>:` are dropped at the end."""
    return RUN_ID


def _drop_run_keys(redis_url: str) -> None:
    """This run's keys leave the shared Redis with it (never FLUSHDB: others use it)."""
    client = SyncRedis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"nhtest:{RUN_ID}:*", count=1000):
            client.unlink(key)
    finally:
        client.close()


@pytest.fixture(scope="session")
async def database_url(backends: Backends) -> AsyncIterator[str]:
    """A fresh, migrated database for this run, dropped at the end."""
    name = f"notifyhub_test_{RUN_ID}"
    admin = await asyncpg.connect(asyncpg_dsn(backends.server_url))
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database(backends.server_url, name)
    try:
        await asyncio.to_thread(upgrade_head, url)
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture
def settings(backends: Backends, database_url: str) -> Settings:
    return Settings(
        redis_url=backends.redis_url,
        database_url=database_url,
        redis_prefix=f"nhtest:{RUN_ID}:{next(_counter)}:",
        jwt_secret="test-secret-" + "x" * 32,  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
    )


@pytest.fixture
async def redis(settings: Settings) -> AsyncIterator[Redis]:
    assert settings.redis_url is not None
    client = Redis.from_url(settings.redis_url)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
async def sessionmaker(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = create_engine(database_url)
    yield create_sessionmaker(engine)
    await engine.dispose()


@pytest.fixture
def make_token(settings: Settings) -> Callable[..., str]:
    tokens = TokenService(settings)

    def make(user: str, tenant: str = "default", ttl_s: int = 3600) -> str:
        return tokens.mint_user_token(user, tenant, ttl_s)

    return make


@pytest.fixture(scope="session")
def create_key(sessionmaker: async_sessionmaker[AsyncSession]) -> Callable[..., Awaitable[str]]:
    async def create(name: str, scope: str, tenant: str | None = None) -> str:
        async with sessionmaker() as session, session.begin():
            return await apikeys.create_key(
                session, name=f"{name}-{secrets.token_hex(4)}", scope=Scope(scope), tenant=tenant
            )

    return create


@pytest.fixture(scope="session")
async def publish_key(create_key: Callable[..., Awaitable[str]]) -> str:
    return await create_key("test-publish", "publish")


@pytest.fixture(scope="session")
async def admin_key(create_key: Callable[..., Awaitable[str]]) -> str:
    return await create_key("test-admin", "admin")


@dataclass
class RunningHub:
    base_url: str
    app: HubApp
    client: httpx.AsyncClient
    server: HubServer
    tokens: TokenService
    app_state: State
    """The lifespan's typed state (`HubApp.running`) while the hub runs."""


class _TestServer(HubServer):
    """`HubServer`, ending as soon as `stop()` is called: uvicorn's own loop looks for an
    exit every 0.1 s, which was half of a test hub's teardown (a second per 20 tests)."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config, app)
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        super().stop()
        self._stopping.set()

    async def main_loop(self) -> None:
        counter = 0  # `on_tick` refreshes the Date header when this is a multiple of 10
        while not await self.on_tick(counter):
            counter += 10
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._stopping.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown, less its fixed 0.1 s pause for connections to close: here
        it ends as soon as they have (the test's client closed its own just before). That
        pause was most of a test hub's teardown (50 s of `make test-fast`'s summed time).
        Whatever is still open after the 0.1 s goes uvicorn's own way."""
        for server in self.servers:
            server.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.1):
                while state.connections or state.tasks:
                    await asyncio.sleep(0.002)
        if state.connections or state.tasks or sockets:
            await super().shutdown(sockets)
            return
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()


@asynccontextmanager
async def serve_hub(
    settings: Settings, app: HubApp | None = None, http: str | None = None
) -> AsyncIterator[RunningHub]:
    """A real uvicorn server on a free port, serving `app` (else `create_app(settings)`);
    `http` names another of uvicorn's HTTP protocols than the hub's own."""
    app = app or create_app(settings)
    options = head_limits()  # as `notifyhub serve` (process/supervisor.py server_config)
    if http is not None:
        options["http"] = http
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan="on",
        log_level="warning",
        timeout_graceful_shutdown=3,
        **options,
    )
    server = _TestServer(config, app)
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(15):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    base_url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=30, verify=TEST_TLS) as client:
            assert app.running is not None
            yield RunningHub(base_url, app, client, server, TokenService(settings), app.running)
    finally:  # also when the test failed inside `async with start_hub(...)`
        server.stop()
        await task


@pytest.fixture
async def hub(settings: Settings) -> AsyncIterator[RunningHub]:
    """A real uvicorn server on a free port, serving `create_app(settings)`."""
    async with serve_hub(settings) as running:
        yield running


@pytest.fixture
def start_hub() -> Callable[[Settings], AbstractAsyncContextManager[RunningHub]]:
    """`serve_hub`, for a test that needs hubs of other settings (several at once)."""
    return serve_hub


@pytest.fixture
def smtp() -> Iterator[Smtp]:
    """A real local SMTP server (support/smtp.py) for one test; tests/integration's
    conftest shares one per module."""
    with smtp_server() as server:
        yield server


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A real local webhook receiver (support/receiver.py) for one test."""
    r = await Receiver().start()
    yield r
    await r.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
