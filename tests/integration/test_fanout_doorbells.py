"""A fan-out's doorbell carries its copies' events: streams that are caught up send them
without reading the log; every other stream reads the log as always."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from integration.test_stream import open_stream
from notifyhub.store.inbox import INLINE_MIN_USERS


@pytest.fixture
def log_reads(hub: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(user, after_seq) of every stream log read the hub made, once it returned."""
    reader = hub.app_state["reader"]
    read = reader.changes
    reads: list[tuple[str, int]] = []

    async def counted(tenant: str, user: str, after_seq: int, max_entries: int) -> Any:
        changes = await read(tenant, user, after_seq, max_entries)
        reads.append((user, after_seq))  # the stream then waits, in the same step
        return changes

    monkeypatch.setattr(reader, "changes", counted)
    return reads


async def _publish(hub: Any, key: str, users: list[str], **fields: Any) -> str:
    body = {"recipients": {"users": users}, "title": "all hands", **fields}
    response = await hub.client.post(
        "/v1/notifications", json=body, headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def test_a_caught_up_stream_gets_a_fan_out_copy_without_a_log_read(
    hub: Any, publish_key: str, make_token: Any, log_reads: list[tuple[str, int]]
) -> None:
    users = [f"all-{i}" for i in range(INLINE_MIN_USERS)]
    token = make_token(users[0])
    async with open_stream(hub, token) as stream:
        assert (await stream.next()).event == "counts"
        while not log_reads:  # the opening catch-up
            await asyncio.sleep(0.01)
        sent = await _publish(hub, publish_key, users, body="b")
        event, _ = await stream.until("notification")
        counts = await stream.next()
    assert log_reads == [(users[0], 0)]  # no read for the broadcast
    listed = await hub.client.get(
        f"/v1/me/notifications/{sent}", headers={"Authorization": f"Bearer {token}"}
    )
    assert event.data == listed.json() and event.seq == 1
    assert counts.event == "counts" and counts.id == event.id
    assert counts.data == {"unread": 1, "unseen": 1, "total": 1, "seq": 1}


async def test_a_stream_behind_reads_the_log_and_misses_nothing(
    hub: Any, publish_key: str, make_token: Any, log_reads: list[tuple[str, int]]
) -> None:
    """A copy offered to a stream whose cursor is not the seq before it (forced here, as
    when a change is in flight) is not sent from the doorbell: the stream reads the log."""
    users = [f"late-{i}" for i in range(INLINE_MIN_USERS)]
    token = make_token(users[0])
    async with open_stream(hub, token, **{"Last-Event-ID": "0"}) as stream:
        while not log_reads:
            await asyncio.sleep(0.01)
        subs = hub.app_state["hub"]._subs[f"default/{users[0]}"]
        for sub in subs:
            sub.cursor = -5  # as if the stream were still behind when the doorbell came
        first = await _publish(hub, publish_key, users)
        event, _ = await stream.until("notification")
        assert event.data["id"] == first
    assert log_reads[-1] == (users[0], 0)


@pytest.mark.parametrize(
    ("fields", "reads_log"),
    [({}, False), ({"category": "billing"}, True), ({"collapse_key": "k"}, True)],
    ids=["plain", "category", "collapse-key"],
)
async def test_on_one_redis_a_single_copy_rings_with_its_event(
    hub: Any,
    publish_key: str,
    make_token: Any,
    log_reads: list[tuple[str, int]],
    fields: dict[str, Any],
    reads_log: bool,
) -> None:
    """On one Redis the place script itself publishes the doorbell with the copy's
    event, whatever the number of recipients; a copy that preferences or a collapse key
    may change is rung plainly and read from the log."""
    token = make_token("solo")
    async with open_stream(hub, token) as stream:
        assert (await stream.next()).event == "counts"
        while not log_reads:
            await asyncio.sleep(0.01)
        sent = await _publish(hub, publish_key, ["solo"], **fields)
        event, _ = await stream.until("notification")
    assert event.data["id"] == sent
    assert log_reads == [("solo", 0), ("solo", 0)] if reads_log else [("solo", 0)]
