"""Cluster-suite fixtures: a local 3-master Redis Cluster (with replicas) for this session.

The core scenarios in test_core.py are the integration suite's own tests, imported so
that they resolve `settings` / `redis` / `redis_client` / `keys` here: the same tests,
run against `redis+cluster://`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis

from notifyhub.settings import Settings
from notifyhub.store.client import create_redis
from notifyhub.store.keys import Keys
from support.cluster import LocalCluster, cluster_settings
from support.database import truncate


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("cluster"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module", autouse=True)
async def _forget_delayed_messages(database_url: str) -> AsyncIterator[None]:
    """After each cluster module, drop the delayed messages it left in PostgreSQL.

    The run shares one database, and a hub whose Redis has no epoch marker (every test's
    fresh key prefix) restores the unconsumed delayed messages it finds there: the
    cluster suite's would reappear, already due, in the standalone tests after it,
    which use the same topics (test_delayed's are imported into test_core)."""
    yield
    await truncate(database_url, "delayed_transitions", "delayed_messages")


@pytest.fixture
def settings(local_cluster: LocalCluster, database_url: str) -> Settings:
    return cluster_settings(local_cluster.url, database_url)


@pytest.fixture
async def redis(settings: Settings) -> AsyncIterator[Redis]:
    assert settings.redis_url is not None
    client = create_redis(settings.redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def redis_client(redis: Redis) -> Redis:
    """The cleaner tests' client, here the cluster's."""
    return redis


@pytest.fixture
def keys(settings: Settings) -> Keys:
    return Keys(settings.redis_prefix)
