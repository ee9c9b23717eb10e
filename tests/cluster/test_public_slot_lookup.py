"""Outside the redis-py versions its slot lookup is tested with (notifyhub/_compat/redis.py)
the hub finds a slot's node through redis-py's public API: publishes, reads and the WAIT
per master still work on a Cluster."""

from __future__ import annotations

import pytest

from integration.test_inbox_api import test_publish_list_get_patch_delete
from integration.test_inbox_store import test_a_replica_shortfall_still_acknowledges
from notifyhub._compat import redis as compat_redis
from notifyhub.store import scripts

__all__ = ["test_a_replica_shortfall_still_acknowledges", "test_publish_list_get_patch_delete"]


@pytest.fixture(autouse=True)
def public_slot_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scripts, "cluster_slot_node", compat_redis._node_from_key)
