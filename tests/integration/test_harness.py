"""The test harness itself: what a test built is freed once it ends, so the test process
does not grow into multi-second collector pauses (tests/support/heap.py)."""

from __future__ import annotations

import gc
import weakref

from notifyhub.api.app import create_app
from notifyhub.settings import Settings
from support.heap import forget_apps


def test_an_app_is_freed_once_forgotten(settings: Settings) -> None:
    app = weakref.ref(create_app(settings))
    forget_apps()
    gc.collect()
    assert app() is None, gc.get_referrers(app())
