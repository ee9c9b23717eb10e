"""`notifyhub restore`: rebuild what Redis holds from PostgreSQL, outside a running hub."""

from __future__ import annotations

from notifyhub.db.engine import create_engine, create_sessionmaker
from notifyhub.services.caches import EpochWatch
from notifyhub.services.delayed import DelayedService, TransitionLog
from notifyhub.services.durable import DurableInbox
from notifyhub.services.preferences import PreferenceService
from notifyhub.services.topics import TopicService
from notifyhub.settings import Settings
from notifyhub.store.client import create_redis
from notifyhub.store.delayed import DelayedStore
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import Keys
from notifyhub.store.topics import TopicCache


async def restore_redis(settings: Settings, redis_url: str, database_url: str) -> None:
    """The same rebuild the hub runs when its epoch marker is missing."""
    redis = create_redis(redis_url)
    engine = create_engine(database_url)
    try:
        keys = Keys(settings.redis_prefix, pubsub_shards=settings.redis_pubsub_shards)
        sessionmaker = create_sessionmaker(engine)
        store = InboxStore(redis, keys, settings.limits)
        delayed = DelayedService(
            DelayedStore(redis, keys, settings.delayed.sets), TransitionLog(sessionmaker)
        )
        durable = (
            DurableInbox(sessionmaker, store) if settings.inbox_durability == "postgres" else None
        )
        watch = EpochWatch(
            redis,
            sessionmaker,
            keys,
            TopicService(TopicCache(redis, keys, store.scripts)),
            PreferenceService(store),
            delayed,
            durable,
        )
        await watch.rebuild()
        await delayed.transitions.flush()
    finally:
        await redis.aclose()
        await engine.dispose()
