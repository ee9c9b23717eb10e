"""Redis state derived from PostgreSQL, rebuilt at start-up."""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from ulid import ULID

from notifyhub.services.delayed import DelayedService
from notifyhub.services.preferences import PreferenceService
from notifyhub.services.topics import TopicService
from notifyhub.store.keys import Keys

log = logging.getLogger(__name__)


async def warm_caches(
    redis: Redis,
    keys: Keys,
    topics: TopicService,
    preferences: PreferenceService,
    delayed: DelayedService,
) -> None:
    """Topic caches always; everything else when the epoch marker says Redis lost its data.

    Failures are logged, not fatal: a missing topic cache is refilled from PostgreSQL on
    first use, and /readyz reports a dependency that is down."""
    try:
        count = await topics.rebuild_cache()
        if not await redis.exists(keys.epoch):
            users = await preferences.rebuild_cache()
            messages = await delayed.restore(expired=True)
            await redis.set(keys.epoch, str(ULID()), nx=True)
            log.info(
                "Redis epoch marker was missing: rebuilt preferences of %d users, "
                "re-queued %d delayed messages",
                users,
                messages,
            )
        log.info("topic cache rebuilt: %d topics", count)
    except Exception:
        log.exception("could not rebuild caches from PostgreSQL at start-up")
