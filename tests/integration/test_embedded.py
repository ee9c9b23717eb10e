"""`notifyhub serve` in embedded mode owns its stores: SIGTERM leaves none behind, a
restart after kill -9 runs exactly one Valkey and one postmaster on the data directory,
and a second hub on the same directory is refused at once, naming the first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from notifyhub.embedded import is_alive, valkey_processes, wait_gone
from support.processes import server_directory

pytestmark = pytest.mark.slow

CLI = Path(sys.executable).parent / "notifyhub"
READY_TIMEOUT_S = 90.0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Hub:
    """`notifyhub serve` with no store URLs, on its own port and a given data directory."""

    def __init__(self, data_dir: Path, log_path: Path) -> None:
        self.data_dir = data_dir
        self.port = _free_port()
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFYHUB_")}
        env["NOTIFYHUB_DATA_DIR"] = str(data_dir)
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(CLI), "serve", "--port", str(self.port)],
                env=env,
                cwd=data_dir.parent,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_path.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"hub not ready:\n{self.log_path.read_text()}")

    def terminate(self, signum: int = signal.SIGTERM) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(60)

    def output(self) -> str:
        return self.log_path.read_text()


def _postmasters(data_dir: Path) -> list[psutil.Process]:
    """postmasters serving `<data_dir>/pg` (their backends carry other command lines)."""
    pgdata = str((data_dir / "pg").resolve())
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["name"] == "postgres" and pgdata in cmdline and is_alive(proc):
            found.append(proc)
    return found


def _valkeys(data_dir: Path) -> list[psutil.Process]:
    return valkey_processes(data_dir / "valkey")


@pytest.fixture
def data_dir() -> Iterator[Path]:
    with server_directory("nh-embedded-hub-") as root:
        directory = root / "data"
        yield directory
        # Whatever a failed test left: never leave store processes on the machine.
        leftovers = _valkeys(directory) + _postmasters(directory)
        for proc in leftovers:
            proc.terminate()
        wait_gone(leftovers, timeout_s=10)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_stops_both_stores(data_dir: Path, tmp_path: Path, signum: int) -> None:
    hub = Hub(data_dir, tmp_path / "hub.log")
    hub.wait_ready()
    stores = _valkeys(data_dir) + _postmasters(data_dir)
    assert len(stores) == 2

    assert hub.terminate(signum) == 0
    assert wait_gone(stores, timeout_s=1) == []
    assert _valkeys(data_dir) == [] and _postmasters(data_dir) == []
    # The credentials come after uvicorn's start-up lines; initdb's output is in the log file.
    output = hub.output()
    assert output.index("Uvicorn running on") < output.index("admin API key")
    assert "initdb" not in output and "initdb" in (data_dir / "embedded.log").read_text()


def test_restart_after_kill_9_runs_one_valkey_and_one_postmaster(
    data_dir: Path, tmp_path: Path
) -> None:
    first = Hub(data_dir, tmp_path / "first.log")
    first.wait_ready()
    [valkey] = _valkeys(data_dir)
    [postmaster] = _postmasters(data_dir)
    first.proc.kill()
    first.proc.wait(10)
    assert is_alive(valkey) and is_alive(postmaster)  # the strays a killed hub leaves

    second = Hub(data_dir, tmp_path / "second.log")
    second.wait_ready()
    assert not is_alive(valkey)  # stopped, not run alongside (one AOF, one writer)
    assert len(_valkeys(data_dir)) == 1
    assert [p.pid for p in _postmasters(data_dir)] == [postmaster.pid]  # adopted

    assert second.terminate() == 0
    assert wait_gone([postmaster], timeout_s=1) == []
    assert _valkeys(data_dir) == [] and _postmasters(data_dir) == []


def test_a_second_hub_on_the_same_directory_is_refused(data_dir: Path, tmp_path: Path) -> None:
    first = Hub(data_dir, tmp_path / "first.log")
    first.wait_ready()
    try:
        started = time.monotonic()
        second = Hub(data_dir, tmp_path / "second.log")
        status = second.proc.wait(5)
        assert time.monotonic() - started < 5
        assert status != 0
        message = " ".join(second.output().split())  # the console wraps long lines
        assert f"pid {first.proc.pid}" in message
        assert f"127.0.0.1:{first.port}" in message
        assert "is running on the data directory" in message
        assert len(_valkeys(data_dir)) == 1 and len(_postmasters(data_dir)) == 1
    finally:
        assert first.terminate() == 0


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`notifyhub ...` in a second terminal: no store URL set, run from `cwd`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFYHUB_")}
    return subprocess.run(
        [str(CLI), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _status(hub: Hub, method: str, path: str, key: str, **body: object) -> int:
    url = f"http://127.0.0.1:{hub.port}{path}"
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.request(method, url, headers=headers, json=body or None).status_code


def test_the_cli_in_a_second_terminal_uses_the_running_hubs_stores(tmp_path: Path) -> None:
    """The acceptance check of `make run`: `notifyhub apikey create --name c --scope
    consume` in another terminal prints a key the hub accepts; every store command works."""
    clone = tmp_path / "clone"
    clone.mkdir()
    data_dir = clone / ".notifyhub"  # `make run`'s default, relative to the clone
    hub = Hub(data_dir, tmp_path / "hub.log")
    try:
        hub.wait_ready()
        made = _cli(clone, "apikey", "create", "--name", "c", "--scope", "consume")
        assert made.returncode == 0, made.stdout + made.stderr
        key = made.stdout.strip()
        assert _status(hub, "GET", "/v1/queues/q/messages", key) == 200
        note = {"recipients": {"users": ["alice"]}, "title": "t"}
        assert _status(hub, "POST", "/v1/notifications", key, **note) == 403  # consume only

        # `make run` printed a publish and a consume key next to the admin key
        printed = " ".join(hub.output().split())
        for label, file in (
            ("admin", "dev-credentials.txt"),
            ("publish", "dev-publish-key.txt"),
            ("consume", "dev-consume-key.txt"),
        ):
            dev_key = (data_dir / file).read_text().strip()
            assert f"{label} API key : {dev_key}" in printed
        publish = (data_dir / "dev-publish-key.txt").read_text().strip()
        assert _status(hub, "POST", "/v1/notifications", publish, **note) == 202
        consume = (data_dir / "dev-consume-key.txt").read_text().strip()
        assert _status(hub, "GET", "/v1/queues/q/messages", consume) == 200

        listed = _cli(clone, "apikey", "list")
        assert listed.returncode == 0 and " c " in listed.stdout, listed.stdout + listed.stderr
        for command in (("migrate",), ("restore",)):
            ran = _cli(clone, *command)
            assert ran.returncode == 0, ran.stdout + ran.stderr
        user_token = _cli(clone, "token", "--user", "alice").stdout.strip()
        assert _status(hub, "GET", "/v1/me/notifications", user_token) == 200
        revoked = _cli(clone, "apikey", "revoke", "c")
        assert revoked.returncode == 0, revoked.stdout + revoked.stderr
    finally:
        assert hub.terminate() == 0
    assert not (data_dir / "stores.json").exists()
    stopped = _cli(clone, "apikey", "list")
    assert stopped.returncode == 1
    said = " ".join((stopped.stdout + stopped.stderr).split())
    assert "no embedded hub is running" in said and "make run" in said
