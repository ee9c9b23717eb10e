"""What a fault scenario gets: the killable processes, credentials, and the run's report;
and the faults two suites inject the same way (a frozen process, a refusing database)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import asyncpg

from notifyhub.services.tokens import TokenService
from notifyhub.settings import Settings
from support.history import Verdict
from support.processes import HubProcess, PostgresProcess, RedisProcess

REPORT: list[Verdict] = []
"""Every scenario's verdicts, printed (and optionally written to docs) at the end."""


@dataclass
class FaultEnv:
    redis: RedisProcess
    postgres: PostgresProcess
    hub: HubProcess
    settings: Settings
    publish_key: str
    consume_key: str
    admin_key: str

    def user_token(self, user: str) -> str:
        return TokenService(self.settings).mint_user_token(user, "default", 3600)

    @property
    def pubsub_client_name(self) -> str:
        return f"notifyhub-pubsub-{self.settings.redis_prefix}events"


@contextlib.contextmanager
def frozen(pids: list[int]) -> Iterator[None]:
    """SIGSTOP the processes; SIGCONT them whatever happens."""
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@contextlib.asynccontextmanager
async def refusing_connections(env: FaultEnv) -> AsyncIterator[None]:
    """What a restart, a failover or an operator does to the hub's database: it refuses
    new connections (`ALLOW_CONNECTIONS false`: SQLSTATE 55000) and the hub's backends
    are terminated (`pg_terminate_backend`: 57P01 on its pooled connections). Restored
    whatever happens."""
    assert env.settings.database_url is not None
    name = env.settings.database_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(env.postgres.server_url.replace("+asyncpg", ""))
    try:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        terminated = await admin.fetchval(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()) AS t",
            name,
        )
        assert terminated > 0
        yield
    finally:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        await admin.close()
