"""Other libraries' internals are used only in notifyhub/_compat/, each fast path only for
the versions it is tested with, and a plain one (said once in the log) outside them."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

import notifyhub
from notifyhub import _compat
from notifyhub._compat import asyncio as compat_asyncio
from notifyhub._compat import redis as compat_redis
from notifyhub._compat import uvicorn as compat_uvicorn

SRC = Path(notifyhub.__file__).parent
COMPAT = SRC / "_compat"
PRIVATE = re.compile(
    r"\._waiters\b|redis\._parsers|\bnodes_manager\b|uvicorn\.protocols"
    r"|\b_is_writable_event\b|\bNOT_ENOUGH_DATA\b|\._parser\b|connection\._reader\b"
)
"""Internals of uvicorn, redis-py and asyncio the hub relies on (and their look-alikes)."""


def _hits_outside_compat() -> list[str]:
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        if COMPAT in path.parents:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PRIVATE.search(line):
                hits.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    return hits


def test_no_private_internals_outside_compat() -> None:
    assert _hits_outside_compat() == []


def test_the_scan_finds_a_private_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "api" / "leaky.py"
    module.parent.mkdir()
    module.write_text("from redis._parsers.hiredis import NOT_ENOUGH_DATA\n")
    monkeypatch.setattr(f"{__name__}.SRC", tmp_path)
    monkeypatch.setattr(f"{__name__}.COMPAT", tmp_path / "_compat")
    assert _hits_outside_compat() == [
        "api/leaky.py:1: from redis._parsers.hiredis import NOT_ENOUGH_DATA"
    ]


@pytest.mark.parametrize(
    ("found", "tested", "inside"),
    [
        ("0.30.0", ">=0.30,<0.55", True),
        ("0.54.9", ">=0.30,<0.55", True),
        ("0.55.0", ">=0.30,<0.55", False),
        ("0.29.9", ">=0.30,<0.55", False),
        (None, ">=0.30,<0.55", False),
        ("not a version", ">=0.30,<0.55", False),
    ],
)
def test_in_range(found: str | None, tested: str, inside: bool) -> None:
    assert _compat.in_range(found, tested) is inside


def test_the_running_versions_take_the_fast_paths() -> None:
    """The versions installed here are the tested ones (pyproject.toml's ranges)."""
    assert compat_uvicorn._LEAN is not None
    assert compat_redis._NOT_ENOUGH_DATA is not None
    assert compat_redis.slot_node is compat_redis._node_from_slot
    assert compat_asyncio.FAST


@pytest.fixture
def untold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_compat, "_told", set())


@pytest.mark.usefixtures("untold")
def test_an_untested_uvicorn_takes_h11_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(compat_uvicorn, "installed", lambda name: "0.99.0")
    with caplog.at_level(logging.WARNING, logger="notifyhub._compat"):
        assert compat_uvicorn._select() is None
        assert compat_uvicorn._select() is None
    assert [r.getMessage() for r in caplog.records] == [
        "uvicorn: version 0.99.0 is outside the tested >=0.30,<0.55; "
        "using the plain implementation (public API only)"
    ]
    monkeypatch.setattr(compat_uvicorn, "_LEAN", None)
    protocol = compat_uvicorn.capped_protocol(
        max_head_bytes=1, refusal=b"", linger_s=0, linger_bytes=0, connection_key="k"
    )
    assert protocol == "h11"


@pytest.mark.usefixtures("untold")
def test_an_untested_redis_takes_the_public_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat_redis, "installed", lambda name: "9.0.0")
    monkeypatch.setattr(compat_redis, "_TESTED", compat_redis._tested())
    assert compat_redis._TESTED is False
    assert compat_redis._not_enough_data() is None
    assert compat_redis._knows_slots() is False  # the public get_node_from_key then


@pytest.mark.usefixtures("untold")
def test_an_untested_python_keeps_the_deques(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat_asyncio.platform, "python_version", lambda: "3.99.0")
    assert compat_asyncio._select() is False


def test_lighten_swaps_an_idle_events_deque_for_a_list() -> None:
    import asyncio

    event = asyncio.Event()
    compat_asyncio._lighten(event)
    assert event._waiters == []
    assert type(event._waiters) is list
    plain = asyncio.Event()
    compat_asyncio._leave(plain)
    assert type(plain._waiters) is not list


def test_the_plain_slot_lookup_has_a_key_of_every_slot() -> None:
    from redis.crc import key_slot

    keys = compat_redis._slot_keys()
    assert [key_slot(key.encode()) for key in keys] == list(range(compat_redis.SLOTS))
