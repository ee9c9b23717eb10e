"""`notifyhub serve --workers N`: N hub processes accepting on one listening socket.

    parent: embedded servers (if any), migrations, bind host:port once
      ├── worker 1: create_app(settings) + HubServer on the shared socket
      └── worker N: ...                  (the kernel spreads accepted connections)

Each worker is a whole hub (its own Redis pool, Pub/Sub listener, background loops):
nothing in the hub assumes one process (the cleaner and producers take Redis locks, the
delayed mover's steps are atomic scripts, the dispatcher claims rows with SKIP LOCKED;
ingest is idempotent; a stream may open on any process). SIGTERM/SIGINT to the parent is
passed on to every worker, which ends its streams and stops. When a worker dies on its
own the parent stops the others and exits non-zero: the process manager restarts it all.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import socket
from collections.abc import Callable
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

import uvicorn
from fastapi import FastAPI

from notifyhub.api.protocol import head_limits
from notifyhub.settings import Settings

log = logging.getLogger(__name__)


def server_config(
    app: FastAPI, settings: Settings, *, access_log: bool, host: str = "127.0.0.1", port: int = 0
) -> uvicorn.Config:
    """The uvicorn settings every hub process runs with."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        proxy_headers=True,
        access_log=access_log,
        timeout_graceful_shutdown=int(settings.stream.shutdown_grace_s) + 1,
        **head_limits(),
    )


def _worker(sock: socket.socket, settings: Settings, access_log: bool) -> None:
    from notifyhub.api.app import create_app
    from notifyhub.process.gc import CollectorPolicy
    from notifyhub.process.server import HubServer

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings)
    config = server_config(app, settings, access_log=access_log)
    HubServer(config, app, CollectorPolicy.of(settings.gc)).run(sockets=[sock])


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run_workers(settings: Settings, host: str, port: int, workers: int, *, access_log: bool) -> int:
    """Start `workers` hub processes on one socket; wait for them; the exit status."""
    sock = bind(host, port)
    context = multiprocessing.get_context("spawn")
    procs: list[BaseProcess] = [
        context.Process(target=_worker, args=(sock, settings, access_log), name=f"hub-{i}")
        for i in range(workers)
    ]
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for proc in procs:
            if proc.pid is not None and proc.exitcode is None:
                proc.terminate()  # SIGTERM: the worker ends its streams and stops

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for proc in procs:
            proc.start()
        log.info("%d hub processes on %s:%d", workers, host, port)
        return _wait(procs, lambda: stopping, stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sock.close()


def _wait(
    procs: list[BaseProcess],
    stopping: Callable[[], bool],
    stop: Callable[[int, FrameType | None], None],
) -> int:
    alive = list(procs)
    status = 0
    while alive:
        ended = wait([p.sentinel for p in alive])
        for proc in [p for p in alive if p.sentinel in ended]:
            proc.join()
            alive.remove(proc)
            if not stopping():
                log.error(
                    "hub process %s exited (%s); stopping the others", proc.name, proc.exitcode
                )
                status = 1
                stop(signal.SIGTERM, None)
    return status
