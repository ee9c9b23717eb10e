"""One hub per embedded data directory: an exclusive `flock` on `<data dir>/hub.lock`.

The lock file records the holder's pid and address, so a second `notifyhub serve` on
the same directory can say which hub to stop. The kernel drops the lock when its
process ends, however it ends (kill -9 included), so a stale file never blocks a start.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = "hub.lock"
READ_TIMEOUT_S = 2.0
"""How long a refused start waits for the holder to write its pid (it writes it at once)."""


@dataclass(frozen=True)
class Holder:
    """The hub that holds a data directory."""

    pid: int
    url: str


class DataDirBusy(RuntimeError):
    """Another live hub holds the data directory."""

    def __init__(self, data_dir: Path, holder: Holder | None) -> None:
        who = f"pid {holder.pid}, {holder.url}" if holder else "pid unknown"
        super().__init__(
            f"another notifyhub ({who}) is running on the data directory {data_dir}: "
            "stop it first, or set NOTIFYHUB_DATA_DIR to another directory"
        )
        self.holder = holder


class DataDirLock:
    """Held for the life of the hub; `release()` (or the process's end) frees it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path, url: str) -> DataDirLock:
        """Lock `data_dir` for this process, or raise `DataDirBusy` naming the holder."""
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by children
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirBusy(data_dir.resolve(), _read_holder(path)) from None
        record = json.dumps({"pid": os.getpid(), "url": url}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None


def _read_holder(path: Path) -> Holder | None:
    """The holder's record; it may be a moment late (written just after the lock)."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while True:
        try:
            record = json.loads(path.read_text())
            return Holder(pid=int(record["pid"]), url=str(record["url"]))
        except (OSError, ValueError, KeyError, TypeError):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
