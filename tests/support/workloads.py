"""Concurrent clients for the fault suite; each workload records a `History` per channel.

A workload is anything with this shape (see `Workload`): `start()` opens its readers,
`write(stop)` runs its writers until `stop` is set, recording every acknowledged id,
`after_fault()` is told when the fault was injected (and the hub answers again), and
`drain(timeout_s)` waits until what was acknowledged arrived (or time is up), closes
its clients and returns its histories.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import random
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httpx

from support.deliveries import define
from support.history import History
from support.receiver import Receiver, Reply
from support.sse import EventReader

CLIENT_TIMEOUT_S = 5.0
WRITE_PAUSE_S = 0.01
RETRY_PAUSE_S = 0.1

OnEvent = Callable[[str, Any], Awaitable[None]]


async def follow_stream(
    client: httpx.AsyncClient, auth: dict[str, str], ready: asyncio.Event, on_event: OnEvent
) -> None:
    """Read one user's stream forever, as a browser would: resume with the last id seen
    after any error or end, and hand each event (kind, data) to `on_event`."""
    last_id: str | None = None
    while True:
        headers = dict(auth)
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        with contextlib.suppress(httpx.HTTPError, TimeoutError, EOFError, ValueError):
            async with client.stream(
                "GET", "/v1/me/stream", headers=headers, timeout=None
            ) as response:
                if response.status_code == 200:
                    reader = EventReader(response)
                    while True:
                        event = await reader.next(timeout=CLIENT_TIMEOUT_S)
                        last_id = event.id or last_id
                        ready.set()
                        await on_event(event.event, event.data)
        await asyncio.sleep(RETRY_PAUSE_S)


async def list_inbox(client: httpx.AsyncClient, auth: dict[str, str]) -> list[dict[str, Any]]:
    """Every item of the user's list (`status=all`), page by page."""
    items: list[dict[str, Any]] = []
    params: dict[str, str | int] = {"status": "all", "limit": 100}
    while True:
        response = await client.get("/v1/me/notifications", params=params, headers=auth)
        response.raise_for_status()
        page = response.json()
        items += page["items"]
        if not page["next_cursor"]:
            return items
        params["cursor"] = page["next_cursor"]


async def follow_streams(
    client: httpx.AsyncClient,
    tokens: dict[str, dict[str, str]],
    on_event: Callable[[str, str, Any], Awaitable[None]],
) -> list[asyncio.Task[None]]:
    """`follow_stream` for each user of `tokens` (user -> auth headers), handing
    `on_event(user, kind, data)` each event; returns once every stream has opened."""
    opened = {user: asyncio.Event() for user in tokens}
    readers = [
        asyncio.create_task(
            follow_stream(client, auth, opened[user], functools.partial(on_event, user))
        )
        for user, auth in tokens.items()
    ]
    async with asyncio.timeout(30):
        await asyncio.gather(*(ready.wait() for ready in opened.values()))
    return readers


class Workload(Protocol):
    async def start(self) -> None: ...

    async def write(self, stop: asyncio.Event) -> None: ...

    def after_fault(self) -> None: ...

    async def drain(self, timeout_s: float) -> list[History]: ...


async def _until(done: Callable[[], bool], timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            while not done():
                await asyncio.sleep(0.1)


async def _until_quiet(
    done: Callable[[], bool], progress: Callable[[], int], quiet_s: float, timeout_s: float
) -> None:
    """Until `done()`, or `progress()` has not moved for `quiet_s` (nothing more coming)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            last, since = progress(), asyncio.get_running_loop().time()
            while not done() and asyncio.get_running_loop().time() - since < quiet_s:
                await asyncio.sleep(0.1)
                if progress() != last:
                    last, since = progress(), asyncio.get_running_loop().time()


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class InboxWorkload:
    """Writers publish to a few users; each user has a live stream resuming with
    Last-Event-ID (reloading the list on `reset`, as the contract says); at the end
    every inbox is listed over REST. Two histories: `inbox (REST)` and `stream (SSE)`."""

    def __init__(
        self,
        base_url: str,
        publish_key: str,
        user_token: Callable[[str], str],
        *,
        users: int = 4,
        writers: int = 3,
    ) -> None:
        self.base_url = base_url
        self.publish = {"Authorization": f"Bearer {publish_key}"}
        self.users = [f"fault-user-{n}" for n in range(users)]
        self.tokens = {u: {"Authorization": f"Bearer {user_token(u)}"} for u in self.users}
        self.writers = writers
        self.rest = History("inbox (REST)")
        self.stream = History("stream (SSE)")
        self.sent: dict[str, set[str]] = {u: set() for u in self.users}
        self.seen: dict[str, set[str]] = {u: set() for u in self.users}
        self._readers: list[asyncio.Task[None]] = []
        self._client = httpx.AsyncClient(base_url=base_url, timeout=CLIENT_TIMEOUT_S)
        self._counter = itertools.count()

    async def start(self) -> None:
        self._readers = await follow_streams(self._client, self.tokens, self._on_event)

    async def write(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._writer(stop, n) for n in range(self.writers)))

    def after_fault(self) -> None:
        pass

    async def _writer(self, stop: asyncio.Event, n: int) -> None:
        rng = random.Random(n)
        while not stop.is_set():
            user = rng.choice(self.users)
            body = {"recipients": {"users": [user]}, "title": f"fault {next(self._counter)}"}
            try:
                response = await self._client.post(
                    "/v1/notifications", json=body, headers=self.publish
                )
            except httpx.HTTPError:
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            if response.status_code == 202:
                item_id = response.json()["id"]
                self.rest.ack(item_id)
                self.stream.ack(item_id)
                self.sent[user].add(item_id)
                await asyncio.sleep(WRITE_PAUSE_S)
            else:
                await asyncio.sleep(RETRY_PAUSE_S)

    async def _on_event(self, user: str, kind: str, data: Any) -> None:
        if kind == "notification":
            self.stream.arrived(data["id"])
            self.seen[user].add(data["id"])
        elif kind == "reset":
            for item_id in await self._list(user) - self.seen[user]:
                self.stream.arrived(item_id)
                self.seen[user].add(item_id)

    async def _list(self, user: str) -> set[str]:
        return {item["id"] for item in await list_inbox(self._client, self.tokens[user])}

    async def _list_retrying(self, user: str, attempts: int = 50) -> set[str]:
        for _ in range(attempts - 1):
            with contextlib.suppress(httpx.HTTPError):
                return await self._list(user)
            await asyncio.sleep(RETRY_PAUSE_S)
        return await self._list(user)

    async def drain(self, timeout_s: float) -> list[History]:
        def streamed() -> bool:
            return all(self.sent[u] <= self.seen[u] for u in self.users)

        await _until_quiet(streamed, lambda: self.stream.arrivals.total(), 3.0, timeout_s)
        await _cancel(self._readers)
        for user in self.users:
            for item_id in await self._list_retrying(user):
                self.rest.arrived(item_id)
        await self._client.aclose()
        return [self.rest, self.stream]


class DelayedWorkload:
    """Producers push delayed messages (due within a second); consumers long-poll,
    record each message they receive and ack it. One history: `delayed`."""

    queue = "faults"

    def __init__(
        self,
        base_url: str,
        publish_key: str,
        consume_key: str,
        *,
        producers: int = 2,
        consumers: int = 2,
    ) -> None:
        self.publish = {"Authorization": f"Bearer {publish_key}"}
        self.consume = {"Authorization": f"Bearer {consume_key}"}
        self.producers = producers
        self.consumers = consumers
        self.history = History("delayed")
        self._tasks: list[asyncio.Task[None]] = []
        self._client = httpx.AsyncClient(base_url=base_url, timeout=CLIENT_TIMEOUT_S)

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._consumer()) for _ in range(self.consumers)]

    async def write(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._producer(stop, n) for n in range(self.producers)))

    def after_fault(self) -> None:
        pass

    async def _producer(self, stop: asyncio.Event, n: int) -> None:
        rng = random.Random(100 + n)
        while not stop.is_set():
            body = {"queue": self.queue, "body": {"n": n}, "delay_ms": rng.randrange(0, 1000),
                    "ttl_ms": 3000}  # fmt: skip
            try:
                response = await self._client.post("/v1/delayed", json=body, headers=self.publish)
            except httpx.HTTPError:
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            if response.status_code == 201:
                self.history.ack(response.json()["id"])
                await asyncio.sleep(WRITE_PAUSE_S)
            else:
                await asyncio.sleep(RETRY_PAUSE_S)

    async def _consumer(self) -> None:
        url = f"/v1/queues/{self.queue}/messages"
        while True:
            try:
                response = await self._client.get(
                    url, params={"wait": 1, "max": 20}, headers=self.consume
                )
                if response.status_code != 200:
                    await asyncio.sleep(RETRY_PAUSE_S)
                    continue
                for message in response.json()["messages"]:
                    self.history.arrived(message["id"])
                    await self._client.post(
                        f"{url}/{message['id']}/ack",
                        json={"receipt": message["receipt"]},
                        headers=self.consume,
                    )
            except httpx.HTTPError:
                await asyncio.sleep(RETRY_PAUSE_S)

    async def drain(self, timeout_s: float) -> list[History]:
        await _until(lambda: not self.history.missing(), timeout_s)
        await _cancel(self._tasks)
        await self._client.aclose()
        return [self.history]


class DeliveriesWorkload:
    """Writers post deliveries to one definition whose webhook is a local receiver; it
    answers every `FAIL_EVERY`-th request 500 (so the dispatcher's retries run through
    the fault too) and the rest 200. Retried every second for ever, so every acknowledged
    delivery must reach it; an arrival is a 2xx-answered request, counted by `webhook-id`.
    One history: `deliveries`."""

    definition = "faults"
    path = "/faults"
    FAIL_EVERY = 4
    PLANNED = 100_000

    def __init__(
        self, base_url: str, publish_key: str, admin_key: str, *, writers: int = 3
    ) -> None:
        self.publish = {"Authorization": f"Bearer {publish_key}"}
        self.admin_key = admin_key
        self.writers = writers
        self.history = History("deliveries")
        self._receiver = Receiver()
        self._counted = 0
        self._client = httpx.AsyncClient(base_url=base_url, timeout=CLIENT_TIMEOUT_S)

    async def start(self) -> None:
        await self._receiver.start()
        cycle = itertools.cycle([Reply(500), *[Reply()] * (self.FAIL_EVERY - 1)])
        self._receiver.plan(self.path, *itertools.islice(cycle, self.PLANNED))
        url = self._receiver.url(self.path)
        await define(self._client, self.admin_key, self.definition, url=url, timeout_s=1,
                     retry_intervals="1s", max_retries=-1)  # fmt: skip

    async def write(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._writer(stop, n) for n in range(self.writers)))

    def after_fault(self) -> None:
        pass

    async def _writer(self, stop: asyncio.Event, n: int) -> None:
        counter = itertools.count()
        while not stop.is_set():
            body = {"definition": self.definition, "payload": {"writer": n, "n": next(counter)}}
            try:
                response = await self._client.post(
                    "/v1/deliveries", json=body, headers=self.publish
                )
            except httpx.HTTPError:
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            if response.status_code == 202:
                self.history.ack(response.json()["id"])
                await asyncio.sleep(WRITE_PAUSE_S)
            else:
                await asyncio.sleep(RETRY_PAUSE_S)

    def _collect(self) -> None:
        """Count the receiver's new 2xx-answered requests as arrivals of their `webhook-id`."""
        fresh = self._receiver.received[self._counted :]
        self._counted += len(fresh)
        for request in fresh:
            if 200 <= request.status < 300:
                self.history.arrived(request.headers["webhook-id"])

    def _all_arrived(self) -> bool:
        self._collect()
        return not self.history.missing()

    async def drain(self, timeout_s: float) -> list[History]:
        await _until(self._all_arrived, timeout_s)
        await self._client.aclose()
        await self._receiver.close()
        self._collect()
        return [self.history]


class SnoozeWorkload:
    """A writer publishes to one user and snoozes each notification for `SNOOZE_S`, longer
    than the fault lasts, while the user's live stream is followed (`follow_streams`:
    resumes with Last-Event-ID, records `reset`s). What it proves, per acknowledged snooze:

    - hidden while snoozed: right after the fault every snooze not due within `MARGIN_S`
      is still out of the default list (one the fault made the hub forget shows early);
    - back at the end: in the default list, unsnoozed, unread;
    - resurfaced ONCE: the stream sends at most one `notification` event with
      `"resurfaced": true` for it;
    - AT ITS TIME: that event arrives no earlier than its due time minus `MARGIN_S`, and
      no later than `LATE_S` after its due time, or after the fault ended (`after_fault`:
      the hub answers again) for one due while the fault lasted, which may be late by
      the outage.

    Due time: the PATCH asked for `SNOOZE_S`, so the snooze ends between the PATCH's
    send + `SNOOZE_S` (the early bound is checked against this) and its answer +
    `SNOOZE_S` (the late bound). A `reset` may legitimately make the client miss a
    resurface logged before it: an id without a resurfaced event counts only if a
    `reset` arrived after it was due (less `MARGIN_S`) and the id is back in the list
    (`missed_across_reset`); with no such reset a missing event is lost.

    Two histories: `snooze (REST)` (an id shown early, still snoozed or gone is lost)
    and `snooze (SSE)` (an id with two or more resurfaced events is duplicated, with
    one early or late event, or none, lost); `early`, `late` and `missed_across_reset`
    hold the ids and `report` the numbers (printed by `drain`)."""

    SNOOZE_S = 6
    MARGIN_S = 1.0
    """Only snoozes due this much after the check are required to be hidden; a resurfaced
    event may arrive this much before its due time (clock and scheduling slack)."""
    LATE_S = 4.0
    """A resurfaced event may arrive this long after max(due time, end of the fault): the
    delayed mover's idle tick (0.25 s), the consumer's poll (1 s, woken at once by its own
    mover), the post-fault rebuild (FLUSHALL: the epoch watch's 0.5 s tick, then the
    delayed queue's restore), and a loaded 2-core machine."""

    def __init__(self, base_url: str, publish_key: str, user_token: Callable[[str], str]) -> None:
        self.publish = {"Authorization": f"Bearer {publish_key}"}
        self.user = "fault-snoozer"
        self.me = {"Authorization": f"Bearer {user_token(self.user)}"}
        self.history = History("snooze (REST)")
        self.stream = History("snooze (SSE)")
        self.due_at: dict[str, float] = {}
        """Each acknowledged snooze's latest possible end (the PATCH's answer + SNOOZE_S,
        the loop's clock)."""
        self.due_from: dict[str, float] = {}
        """Each acknowledged snooze's earliest possible end (the PATCH sent + SNOOZE_S)."""
        self.resurfaced: dict[str, list[float]] = {}
        """Each id's resurfaced `notification` events: when they arrived (the loop's clock)."""
        self.resets: list[float] = []
        """When each `reset` arrived."""
        self.recovered_at: float | None = None
        """When the fault ended (`after_fault`)."""
        self.early: set[str] = set()
        """Shown in the list right after the fault though not due (REST)."""
        self.early_events: set[str] = set()
        self.late: set[str] = set()
        self.missed_across_reset: set[str] = set()
        self.report = ""
        self._readers: list[asyncio.Task[None]] = []
        self._client = httpx.AsyncClient(base_url=base_url, timeout=CLIENT_TIMEOUT_S)
        self._counter = itertools.count()

    async def start(self) -> None:
        self._readers = await follow_streams(self._client, {self.user: self.me}, self._on_event)

    def after_fault(self) -> None:
        self.recovered_at = asyncio.get_running_loop().time()

    async def _on_event(self, user: str, kind: str, data: Any) -> None:
        now = asyncio.get_running_loop().time()
        if kind == "notification" and data.get("resurfaced") is True:
            self.resurfaced.setdefault(data["id"], []).append(now)
        elif kind == "reset":
            self.resets.append(now)

    async def write(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            body = {"recipients": {"users": [self.user]}, "title": f"snooze {next(self._counter)}"}
            try:
                published = await self._client.post(
                    "/v1/notifications", json=body, headers=self.publish
                )
                if published.status_code != 202:
                    await asyncio.sleep(RETRY_PAUSE_S)
                    continue
                item_id = published.json()["id"]
                sent_at = loop.time()
                snoozed = await self._client.patch(
                    f"/v1/me/notifications/{item_id}",
                    json={"snooze": self.SNOOZE_S},
                    headers=self.me,
                )
            except httpx.HTTPError:
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            if snoozed.status_code == 200:
                self.history.ack(item_id)
                self.stream.ack(item_id)
                self.due_from[item_id] = sent_at + self.SNOOZE_S
                self.due_at[item_id] = loop.time() + self.SNOOZE_S
            await asyncio.sleep(0.1)

    def _deadline(self, item_id: str) -> float:
        """The latest a resurfaced event of `item_id` may arrive."""
        return max(self.due_at[item_id], self.recovered_at or 0.0) + self.LATE_S

    def _excused(self, item_id: str, back: set[str]) -> bool:
        """No resurfaced event, but a `reset` after it was due may have skipped it, and it
        is back in the list."""
        due = self.due_from[item_id] - self.MARGIN_S
        return item_id in back and any(at >= due for at in self.resets)

    async def _back(self) -> set[str]:
        """The ids in the default list that are unread and not snoozed."""
        found: set[str] = set()
        params: dict[str, str | int] = {"limit": 100}
        while True:
            response = await self._client.get(
                "/v1/me/notifications", params=params, headers=self.me
            )
            response.raise_for_status()
            page = response.json()
            found.update(
                item["id"]
                for item in page["items"]
                if item["snoozed_until"] is None and item["status"] == "unread"
            )
            if not page["next_cursor"]:
                return found
            params["cursor"] = page["next_cursor"]

    async def drain(self, timeout_s: float) -> list[History]:
        loop = asyncio.get_running_loop()
        checked_at = loop.time()
        ends_by = checked_at + timeout_s
        shown: set[str] = set()
        for _ in range(50):
            with contextlib.suppress(httpx.HTTPError):
                shown = await self._back()
                break
            await asyncio.sleep(RETRY_PAUSE_S)
        self.early = {i for i in shown if self.due_at.get(i, 0) > checked_at + self.MARGIN_S}
        back: set[str] = set()

        async def all_back() -> None:
            nonlocal back
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    back = await self._back()
                    if self.history.acknowledged <= back:
                        return
                await asyncio.sleep(0.2)

        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, ends_by - loop.time())):
                await all_back()

        # The stream: every id's event, and a second one, if any, within its window.
        acked = self.stream.acknowledged
        watch_until = min(ends_by, max((self._deadline(i) for i in acked), default=0.0))

        def watched() -> bool:
            heard = all(i in self.resurfaced or self._excused(i, back) for i in acked)
            return heard and loop.time() >= watch_until

        await _until(watched, max(0.0, ends_by - loop.time()))
        await _cancel(self._readers)
        for item_id in (back & self.history.acknowledged) - self.early:
            self.history.arrived(item_id)
        self._check_stream(back)
        await self._client.aclose()
        print(self.report)
        return [self.history, self.stream]

    def _check_stream(self, back: set[str]) -> None:
        """`snooze (SSE)`: each resurfaced event an arrival (two: duplicated); an id whose
        only event came early or late, or that had none (unless excused), is lost."""
        offsets: list[float] = []  # each event's arrival less its snooze's earliest end
        for item_id in self.stream.acknowledged:
            times = self.resurfaced.get(item_id, [])
            offsets += [at - self.due_from[item_id] for at in times]
            early_by = max((self.due_from[item_id] - at for at in times), default=0.0)
            late_by = max((at - self._deadline(item_id) for at in times), default=0.0)
            if early_by > self.MARGIN_S:
                self.early_events.add(item_id)
            if late_by > 0:
                self.late.add(item_id)
            if len(times) > 1:
                for _ in times:
                    self.stream.arrived(item_id)
            elif times and item_id not in self.early_events | self.late:
                self.stream.arrived(item_id)
            elif not times and self._excused(item_id, back):
                self.missed_across_reset.add(item_id)
                self.stream.arrived(item_id)
        events = sum(len(t) for t in self.resurfaced.values())
        self.report = (
            f"snooze: {len(self.stream.acknowledged)} acknowledged, "
            f"{len(self.early)} shown early (REST); {events} resurfaced events, "
            f"{len(self.early_events)} early, {len(self.late)} late (arrived "
            f"{min(offsets, default=0.0):+.2f} s to {max(offsets, default=0.0):+.2f} s "
            f"from the earliest due), {len(self.resets)} resets, "
            f"{len(self.missed_across_reset)} missed across a reset"
        )


class BroadcastWorkload:
    """Writers broadcast to one big group (5,000 members: a publish writes its copies in
    ten batches, so a hub killed while writers run is likely killed mid-broadcast), each
    broadcast with its own Idempotency-Key, retried with that key until it is
    acknowledged; a few members follow their streams (resuming with Last-Event-ID) and
    list their inboxes at the end. A broadcast is known by its title, so the same one
    under two ids counts twice. Histories `broadcast (REST)` and `broadcast (SSE)`, keyed
    `<member>/<title>`."""

    group = "fault-crowd"

    def __init__(
        self,
        base_url: str,
        publish_key: str,
        admin_key: str,
        user_token: Callable[[str], str],
        *,
        members: int = 5000,
        followed: int = 3,
        writers: int = 2,
    ) -> None:
        self.publish = {"Authorization": f"Bearer {publish_key}"}
        self.admin = {"Authorization": f"Bearer {admin_key}"}
        self.members = [f"crowd-{n}" for n in range(members)]
        self.followed = self.members[:: members // followed][:followed]
        self.tokens = {u: {"Authorization": f"Bearer {user_token(u)}"} for u in self.followed}
        self.writers = writers
        self.rest = History("broadcast (REST)")
        self.stream = History("broadcast (SSE)")
        self._readers: list[asyncio.Task[None]] = []
        self._client = httpx.AsyncClient(base_url=base_url, timeout=CLIENT_TIMEOUT_S)

    async def start(self) -> None:
        url = f"/v1/admin/groups/{self.group}"
        (await self._client.put(url, headers=self.admin)).raise_for_status()
        add = {"add": self.members}
        (await self._client.post(f"{url}/members", json=add, headers=self.admin)).raise_for_status()
        self._readers = await follow_streams(self._client, self.tokens, self._on_event)

    async def write(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._writer(stop, n) for n in range(self.writers)))

    def after_fault(self) -> None:
        pass

    async def _writer(self, stop: asyncio.Event, n: int) -> None:
        for i in itertools.count():
            if stop.is_set():
                return
            title = f"crowd {n}-{i}"
            body = {"recipients": {"groups": [self.group]}, "title": title}
            headers = {**self.publish, "Idempotency-Key": f"crowd-{n}-{i}"}
            while not stop.is_set():  # the same key until acknowledged: never a second id
                with contextlib.suppress(httpx.HTTPError):
                    response = await self._client.post(
                        "/v1/notifications", json=body, headers=headers
                    )
                    if response.status_code == 202:
                        for user in self.followed:
                            self.rest.ack(f"{user}/{title}")
                            self.stream.ack(f"{user}/{title}")
                        await asyncio.sleep(WRITE_PAUSE_S)
                        break
                await asyncio.sleep(RETRY_PAUSE_S)

    async def _on_event(self, user: str, kind: str, data: Any) -> None:
        if kind == "notification":
            self.stream.arrived(f"{user}/{data['title']}")

    async def _titles(self, user: str) -> list[str]:
        return [item["title"] for item in await list_inbox(self._client, self.tokens[user])]

    async def drain(self, timeout_s: float) -> list[History]:
        def streamed() -> bool:
            return all(self.stream.arrivals[key] for key in self.stream.acknowledged)

        # A deferred broadcast's copies are written after its 202 (services/fanouts.py):
        # one whose hub was killed halfway is finished by the next hub once its lease runs
        # out, and its streams get it then. The lists are read until they hold every
        # acknowledged broadcast (or time is up), then the streams are waited for.
        started = asyncio.get_running_loop().time()
        listed: dict[str, list[str]] = {}
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while True:
                    listed = {user: await self._titles(user) for user in self.followed}
                    held = {f"{u}/{title}" for u, titles in listed.items() for title in titles}
                    if self.rest.acknowledged <= held:
                        break
                    await asyncio.sleep(0.5)
        left_s = max(timeout_s - (asyncio.get_running_loop().time() - started), 3.0)
        await _until_quiet(streamed, lambda: self.stream.arrivals.total(), 3.0, left_s)
        await _cancel(self._readers)
        for user, titles in listed.items():
            for title in titles:
                self.rest.arrived(f"{user}/{title}")
        await self._client.aclose()
        return [self.rest, self.stream]
