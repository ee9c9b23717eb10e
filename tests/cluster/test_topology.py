"""A Redis Cluster whose topology changes under the hub (a failover, a resharding): a
request the cluster client cannot route answers 503, never 500."""

from __future__ import annotations

from typing import Any

import pytest


async def test_a_slot_the_client_lost_track_of_answers_503(
    hub: Any, publish_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py's cluster client, its slot map caught mid-change, finds no node for a
    slot and raises AttributeError on the None it got (redis-py issue #3835): for the
    client it is "no node serves this slot now", as a ClusterDownError is."""
    client = hub.app_state["redis"]

    async def no_node(*args: Any, **kwargs: Any) -> list[None]:
        return [None]

    async def publish() -> Any:
        body = {"recipients": {"users": ["lost-slot"]}, "title": "hello"}
        headers = {"Authorization": f"Bearer {publish_key}"}
        return await hub.client.post("/v1/notifications", json=body, headers=headers)

    monkeypatch.setattr(client, "_determine_nodes", no_node)
    response = await publish()
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "Redis is unavailable"
    monkeypatch.undo()  # the map settled: the same request goes through
    assert (await publish()).status_code == 202
