"""Builder for routing: topics (their Redis cache) and users' preferences."""

from __future__ import annotations

from dataclasses import dataclass

from notifyhub.features.clients import Database, RedisClients
from notifyhub.services.preferences import PreferenceService
from notifyhub.services.topics import TopicService
from notifyhub.store.inbox import InboxStore
from notifyhub.store.topics import TopicCache


@dataclass(frozen=True, slots=True)
class Routing:
    topics: TopicService
    preferences: PreferenceService


def routing(clients: RedisClients, database: Database, store: InboxStore) -> Routing:
    """Nothing to release: both live on the shared clients."""
    cache = TopicCache(clients.redis, clients.keys, store.scripts)
    return Routing(
        TopicService(cache),
        PreferenceService(store),
    )
