"""The fault suite's live-streams workload: Redis loses every user's data under open
streams (a FLUSHALL), and no stream may silently miss what comes after.

Each user's stream is first brought to a cursor (`before` notifications, all read).
After the fault half the users get more notifications than that cursor (their new seq
passes the old cursor: only the epoch tells the stream), half fewer. A client does what
the contract says: it resumes with Last-Event-ID after a disconnect and reloads its list
on `reset`. Two histories:

- `post-loss (SSE)`: every notification acknowledged after the fault, arrived when the
  stream sent it, or when a `reset` made the client reload a list holding it. Lost: the
  stream neither sent it nor told the client to reload (a silent gap);
- `streams reset`: one entry per stream; delivered when it got a `reset` once at its
  cursor, duplicated when it got more than one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any

import httpx

from support.history import History
from support.workloads import CLIENT_TIMEOUT_S, RETRY_PAUSE_S, _cancel, _until_quiet, follow_stream

PUBLISH_ATTEMPTS = 50


class LiveStreamsWorkload:
    def __init__(
        self,
        base_url: str,
        publish_key: str,
        user_token: Callable[[str], str],
        *,
        users: int = 20,
        before: int = 6,
        more: int = 9,
        fewer: int = 3,
    ) -> None:
        self.publish = {"Authorization": f"Bearer {publish_key}"}
        self.users = [f"live-{n}" for n in range(users)]
        self.tokens = {u: {"Authorization": f"Bearer {user_token(u)}"} for u in self.users}
        self.counts = {u: more if n % 2 == 0 else fewer for n, u in enumerate(self.users)}
        self.before = before
        self.post = History("post-loss (SSE)")
        self.resets = History("streams reset")
        self.sent: dict[str, set[str]] = {u: set() for u in self.users}
        self.seen: dict[str, set[str]] = {u: set() for u in self.users}
        self._faulted = asyncio.Event()
        self._ready = False
        """Every stream is at its cursor: a reset from now on is the fault's (it may come
        before `after_fault`, which waits for the hub to answer first)."""
        self._readers: list[asyncio.Task[None]] = []
        self._client = httpx.AsyncClient(base_url=base_url, timeout=CLIENT_TIMEOUT_S)

    async def start(self) -> None:
        """Open every stream and bring it to cursor `before`."""
        opened = {u: asyncio.Event() for u in self.users}
        self._readers = [asyncio.create_task(self._read(u, opened[u])) for u in self.users]
        async with asyncio.timeout(30):
            await asyncio.gather(*(ready.wait() for ready in opened.values()))
            await asyncio.gather(*(self._send(u, self.before, None) for u in self.users))
            while any(not self.sent[u] <= self.seen[u] for u in self.users):
                await asyncio.sleep(0.05)
        for user in self.users:
            self.resets.ack(user)
        self._ready = True

    def after_fault(self) -> None:
        self._faulted.set()

    async def write(self, stop: asyncio.Event) -> None:
        """After the fault, at once (before or after the hub's epoch watch sees it), each
        user's notifications in one burst: a stream may read only once its user's new
        seq has passed the old cursor."""
        await self._faulted.wait()
        posts = [(u, i) for u in self.users for i in range(self.counts[u])]
        await asyncio.gather(*(self._post(u, f"{u} after {i}", self.post) for u, i in posts))

    async def _send(self, user: str, n: int, history: History | None) -> None:
        for i in range(n):
            await self._post(user, f"{user} {i}", history)

    async def _post(self, user: str, title: str, history: History | None) -> None:
        body = {"recipients": {"users": [user]}, "title": title}
        for _ in range(PUBLISH_ATTEMPTS):
            with contextlib.suppress(httpx.HTTPError):
                response = await self._client.post(
                    "/v1/notifications", json=body, headers=self.publish
                )
                if response.status_code == 202:
                    self._acked(user, response.json()["id"], history)
                    return
            await asyncio.sleep(RETRY_PAUSE_S)

    def _acked(self, user: str, item_id: str, history: History | None) -> None:
        self.sent[user].add(item_id)
        if history is not None:
            history.ack(item_id)

    async def _read(self, user: str, ready: asyncio.Event) -> None:
        on_event = functools.partial(self._on_event, user)
        await follow_stream(self._client, self.tokens[user], ready, on_event)

    async def _on_event(self, user: str, kind: str, data: Any) -> None:
        if kind == "notification":
            self._arrived(user, data["id"])
        elif kind == "reset":
            if self._ready:
                self.resets.arrived(user)
            for item_id in await self._list(user):
                self._arrived(user, item_id)

    def _arrived(self, user: str, item_id: str) -> None:
        if item_id not in self.seen[user]:
            self.seen[user].add(item_id)
            self.post.arrived(item_id)

    async def _list(self, user: str) -> set[str]:
        found: set[str] = set()
        params: dict[str, str | int] = {"status": "all", "limit": 100}
        while True:
            response = await self._client.get(
                "/v1/me/notifications", params=params, headers=self.tokens[user]
            )
            response.raise_for_status()
            page = response.json()
            found.update(item["id"] for item in page["items"])
            if not page["next_cursor"]:
                return found
            params["cursor"] = page["next_cursor"]

    async def drain(self, timeout_s: float) -> list[History]:
        def streamed() -> bool:
            return all(self.sent[u] <= self.seen[u] for u in self.users)

        await _until_quiet(streamed, lambda: self.post.arrivals.total(), 3.0, timeout_s)
        await _cancel(self._readers)
        await self._client.aclose()
        return [self.post, self.resets]
