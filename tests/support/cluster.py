"""Settings for a hub on the local Redis Cluster (tests/cluster)."""

from __future__ import annotations

import uuid

from notifyhub.settings import Settings


def cluster_settings(url: str, database_url: str, **fields: object) -> Settings:
    """A hub on `url` with a key prefix of its own."""
    return Settings(
        redis_url=url,
        database_url=database_url,
        redis_prefix=f"nhcluster:{uuid.uuid4().hex[:8]}:",
        jwt_secret="test-secret-" + "x" * 32,  # type: ignore[arg-type]
        _env_file=None,  # type: ignore[call-arg]
        **fields,  # type: ignore[arg-type]
    )
