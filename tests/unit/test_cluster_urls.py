"""Cluster URLs and the sharded doorbells' channel choice."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from notifyhub.store.client import ClusterUrl, parse_cluster_url
from notifyhub.store.doorbells import Doorbells
from notifyhub.store.keys import Keys


def test_cluster_url_with_seeds_credentials_and_tls() -> None:
    url = "redis+cluster://app:p%40ss@10.0.0.1:7000,10.0.0.2,[::1]:7002/?tls=1"
    assert parse_cluster_url(url) == ClusterUrl(
        nodes=(("10.0.0.1", 7000), ("10.0.0.2", 6379), ("::1", 7002)),
        username="app",
        password="p@ss",
        tls=True,
    )


def test_a_node_url_keeps_the_credentials() -> None:
    parsed = parse_cluster_url("redis+cluster://:s%2Fcret@h:7000")
    assert parsed is not None
    assert parsed.node_url("10.1.1.1", 7001) == "redis://:s%2Fcret@10.1.1.1:7001/0"


@pytest.mark.parametrize("url", ["redis://h:6379/0", "redis+sentinel://h:26379/m"])
def test_other_schemes_are_not_cluster(url: str) -> None:
    assert parse_cluster_url(url) is None


@pytest.mark.parametrize("url", ["redis+cluster://", "redis+cluster://h:7000/3"])
def test_malformed_cluster_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="Cluster URL"):
        parse_cluster_url(url)


def test_standalone_doorbells_use_one_channel_for_a_batch() -> None:
    bells = Doorbells(Keys("p:"), sharded=False)
    assert bells.channels == ["p:events"]
    assert bells.messages([("t/a", 1), ("t/b", 0)]) == [("p:events", b"t/a 1\nt/b 0")]


def test_sharded_doorbells_split_a_batch_by_the_users_shard() -> None:
    bells = Doorbells(Keys("p:", pubsub_shards=4), sharded=True)
    assert bells.channels == ["p:events{0}", "p:events{1}", "p:events{2}", "p:events{3}"]
    members = [f"t/u{i}" for i in range(40)]
    messages = dict(bells.messages([(m, 0) for m in members]))
    assert set(messages) == set(bells.channels)  # 40 users reach every shard
    for channel, payload in messages.items():
        for line in payload.decode().splitlines():
            assert bells.channel_of(line.split(" ")[0]) == channel


def test_shard_channels_spread_over_slots() -> None:
    bells = Doorbells(Keys("p:"), sharded=True)
    slots = {key_slot(channel.encode()) for channel in bells.channels}
    assert len(slots) == len(bells.channels)
