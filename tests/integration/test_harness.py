"""The test harness itself: what a test built is freed once it ends, so the test process
does not grow into multi-second collector pauses (tests/support/heap.py), and a hub a
failed test started is stopped all the same."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from notifyhub.api.app import create_app
from notifyhub.settings import Settings
from support.heap import forget_apps


def test_an_app_is_freed_once_forgotten(settings: Settings) -> None:
    app = weakref.ref(create_app(settings))
    forget_apps()
    gc.collect()
    assert app() is None, gc.get_referrers(app())


async def test_a_hub_is_stopped_when_the_test_fails_inside_it(
    settings: Settings, start_hub: Callable[[Settings], AbstractAsyncContextManager[Any]]
) -> None:
    """A failure inside `async with start_hub(...)` once left the hub serving and its
    listening socket open until the session ended, where pytest reported the unclosed
    socket as an error of its own (a CI run, stop 43)."""
    listening = []

    async def fail_inside() -> None:
        async with start_hub(settings) as hub:
            listening.extend(hub.server.servers[0].sockets)
            raise RuntimeError("the test failed here")

    with pytest.raises(RuntimeError):
        await fail_inside()
    assert [s.fileno() for s in listening] == [-1]
