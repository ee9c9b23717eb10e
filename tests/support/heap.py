"""What the test process must let go of between tests (a hub process never needs to)."""

from __future__ import annotations

import functools

import fastapi.dependencies.models as fastapi_models


def forget_apps() -> None:
    """Clear FastAPI's caches of which endpoints are coroutines or generators.

    Each holds 4,096 callables, and with them the app whose closures they are: left alone
    they kept the last ~100 apps the tests built alive, 3 million objects whose full
    collections paused the test process for up to 3 s. That is past Redis' 2 s reply
    timeout: a request of an unrelated test in flight got a 503. A hub process builds
    one app, so only tests need this."""
    for cached in vars(fastapi_models).values():
        if isinstance(cached, functools._lru_cache_wrapper):
            cached.cache_clear()
