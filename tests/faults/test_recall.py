"""A recall of a thread's latest activity, on a hub process of its own: the recalled
content leaves the thread item, the thread's activities and the user's open stream (the
item shows the activity before it again), for every thread recalled.

Each place is a row of the fault table: acknowledged = recalls answered 204, delivered =
those whose content is gone from that place (the item and the stream show the activity
before it), lost = those it still shows."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest

from support.faultenv import FaultEnv
from support.history import History, Verdict
from support.sse import EventReader

pytestmark = pytest.mark.slow

SCENARIO = "recall of a thread's latest activity"
THREADS = 20
CLIENT_TIMEOUT_S = 5.0
STREAM_WAIT_S = 10.0
USER = "recaller"


async def _publish(client: httpx.AsyncClient, key: str, thread: str, body: str) -> str:
    note = {"recipients": {"users": [USER]}, "title": thread, "body": body, "thread_key": thread}
    response = await client.post(
        "/v1/notifications", json=note, headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _falls_back(item: dict[str, object], kept: str) -> bool:
    """The thread item shows its kept activity again, not the recalled one."""
    thread = item.get("thread")
    return isinstance(thread, dict) and thread["latest_id"] == kept and item["body"] == "kept"


async def _streamed(stream: EventReader, threads: dict[str, str], history: History) -> None:
    """Each thread's `update` showing its kept activity again, until all came or the wait
    ends (a missing one is lost)."""
    waiting = set(threads)
    with contextlib.suppress(TimeoutError):  # what has not come by then is lost
        async with asyncio.timeout(STREAM_WAIT_S):
            while waiting:
                event = await stream.next(STREAM_WAIT_S)
                kept = event.data.get("id") if event.event == "update" else None
                if kept in waiting and _falls_back(event.data, kept):
                    waiting.discard(kept)
                    history.arrived(threads[kept])


async def test_recall_of_a_threads_latest_activity(
    fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]],
    fault_report: list[Verdict],
) -> None:
    item, listed, streamed = (
        History("recall: thread item (REST)"),
        History("recall: activities (REST)"),
        History("recall: thread item (SSE)"),
    )
    async with (
        fault_env() as env,
        httpx.AsyncClient(base_url=env.hub.base_url, timeout=CLIENT_TIMEOUT_S) as client,
    ):
        me = {"Authorization": f"Bearer {env.user_token(USER)}"}
        threads: dict[str, str] = {}  # kept (the thread item's id) -> recalled
        for i in range(THREADS):
            kept = await _publish(client, env.publish_key, f"thread-{i}", "kept")
            threads[kept] = await _publish(client, env.publish_key, f"thread-{i}", "recalled")
        stream_headers = {**me, "Accept": "text/event-stream"}
        async with client.stream("GET", "/v1/me/stream", headers=stream_headers) as response:
            stream = EventReader(response)
            await stream.next()  # the opening counts
            publisher = {"Authorization": f"Bearer {env.publish_key}"}
            for recalled in threads.values():
                answer = await client.delete(f"/v1/notifications/{recalled}", headers=publisher)
                if answer.status_code == 204:
                    for history in (item, listed, streamed):
                        history.ack(recalled)
            await _streamed(stream, threads, streamed)
        for kept, recalled in threads.items():
            shown = await client.get(f"/v1/me/notifications/{kept}", headers=me)
            if shown.status_code == 200 and _falls_back(shown.json(), kept):
                item.arrived(recalled)
            activities = await client.get(f"/v1/me/notifications/{kept}/activities", headers=me)
            if [a["id"] for a in activities.json()["items"]] == [kept]:
                listed.arrived(recalled)
    verdicts = [h.verdict(SCENARIO) for h in (item, listed, streamed)]
    fault_report.extend(verdicts)
    for verdict in verdicts:
        assert verdict.acknowledged == THREADS, verdict
        assert (verdict.lost, verdict.duplicated) == (0, 0), (verdict, verdict.lost_ids[:5])
