"""Cluster URLs and the sharded doorbells' channel choice."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from notifyhub.store.client import ClusterUrl, parse_cluster_url
from notifyhub.store.doorbells import SHARED_AT, SHARED_LINES, Doorbells
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


def test_one_shard_is_the_common_channel_as_before_shards() -> None:
    bells = Doorbells(Keys("p:", pubsub_shards=1), sharded=False)
    assert bells.channels == [bells.common] == ["p:events"]
    assert bells.messages([("t/a", 1), ("t/b", 0)]) == [("p:events", b"t/a 1\nt/b 0")]


@pytest.mark.parametrize("sharded", [False, True])
def test_doorbells_split_a_batch_by_the_users_shard(sharded: bool) -> None:
    bells = Doorbells(Keys("p:", pubsub_shards=4), sharded=sharded)
    assert bells.channels == ["p:events{0}", "p:events{1}", "p:events{2}", "p:events{3}"]
    members = [f"t/u{i}" for i in range(40)]
    messages = dict(bells.messages([(m, 0) for m in members], b"!head"))
    assert set(messages) == set(bells.channels)  # 40 users reach every shard
    for channel, payload in messages.items():
        head, *lines = payload.decode().splitlines()
        assert head == "!head"  # each shard's message repeats the header
        for line in lines:
            assert bells.channel_of(line.split(" ")[0]) == channel


@pytest.mark.parametrize("sharded", [False, True])
def test_a_broadcasts_batch_rings_once_on_the_common_channel(sharded: bool) -> None:
    """SHARED_AT users or more: one message, not one per shard each repeating the header."""
    bells = Doorbells(Keys("p:"), sharded=sharded)
    members = [f"t/u{i}" for i in range(SHARED_AT)]
    assert bells.channels_of(members) == [bells.common] * SHARED_AT
    [(channel, payload)] = bells.messages([(m, 0) for m in members], b"!head")
    assert channel == bells.common and payload.count(b"!head") == 1
    assert len(bells.messages([(m, 0) for m in members[:-1]], b"!head")) > 1


class _Commands:
    """What a pipeline was given (queue_rereads only adds commands)."""

    def __init__(self) -> None:
        self.sent: list[tuple[object, ...]] = []

    def execute_command(self, *args: object) -> None:
        self.sent.append(args)


@pytest.mark.parametrize("sharded", [False, True])
def test_a_big_fan_outs_rereads_are_split_into_bounded_messages(sharded: bool) -> None:
    """Every process reads a common-channel message in one go: a fan-out's re-read lines
    come in messages of SHARED_LINES users at most, each with the header, every user once."""
    bells = Doorbells(Keys("p:"), sharded=sharded)
    members = [f"t/u{i}" for i in range(2 * SHARED_LINES + 1)]
    pipe = _Commands()
    bells.queue_rereads(pipe, members, b"~trace")
    assert [args[:2] for args in pipe.sent] == [(bells.publish_command, bells.common)] * 3
    lines = []
    for *_, payload in pipe.sent:
        assert isinstance(payload, bytes)
        head, *rest = payload.decode().split("\n")
        assert head == "~trace" and len(rest) <= SHARED_LINES
        lines += rest
    assert lines == [f"{m} 0" for m in members]


def test_a_users_shard_is_their_slot() -> None:
    """By default one shard per Cluster slot: the slot of the user's keys."""
    keys = Keys("p:")
    bells = Doorbells(keys, sharded=False)
    for tenant, user in [("t", "a"), ("default", "bob"), ("x{y}", "z%")]:
        slot = key_slot(keys.inbox(tenant, user).seq.encode())
        assert bells.channel_of(f"{tenant}/{user}") == keys.shard_channel(slot)
    assert Doorbells(Keys("p:", pubsub_shards=8), sharded=False).channel_of("t/a") == (
        keys.shard_channel(key_slot(keys.inbox("t", "a").seq.encode()) % 8)
    )


def test_shard_channels_spread_over_slots() -> None:
    bells = Doorbells(Keys("p:", pubsub_shards=16), sharded=True)
    slots = {key_slot(channel.encode()) for channel in bells.channels}
    assert len(slots) == len(bells.channels)
