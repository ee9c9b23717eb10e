"""A small SSE reader over a real HTTP connection: bounded event counts, hard timeouts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Event:
    event: str
    id: str | None
    """`<seq>-<epoch>` (realtime/events.py); the bare seq for seqs older than epochs; then
    `.<notification id>` for each notification shown ahead of its copy."""
    data: Any
    raw: str = field(repr=False, default="")

    @property
    def seq(self) -> int | None:
        return None if self.id is None else int(self.id.split(".")[0].partition("-")[0])

    @property
    def epoch(self) -> str | None:
        return None if self.id is None else self.id.split(".")[0].partition("-")[2]

    @property
    def ahead(self) -> list[str]:
        """The notifications shown ahead of their copies, as the id says."""
        return [] if self.id is None else self.id.split(".")[1:]


class EventReader:
    """Parses `text/event-stream` lines from an open httpx streaming response."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines: AsyncIterator[str] = response.aiter_lines()
        self.retry: int | None = None
        self.comments = 0

    async def next(self, timeout: float = 5.0) -> Event:
        async with asyncio.timeout(timeout):
            return await self._next()

    async def _next(self) -> Event:
        fields: dict[str, str] = {}
        raw: list[str] = []
        async for line in self._lines:
            if line == "":
                if "data" in fields or "event" in fields:
                    return Event(
                        fields.get("event", "message"),
                        fields.get("id"),
                        json.loads(fields.get("data", "null")),
                        "\n".join(raw),
                    )
                continue
            raw.append(line)
            if line.startswith(":"):
                self.comments += 1
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "retry":
                self.retry = int(value)
            elif name == "data" and "data" in fields:
                fields["data"] += "\n" + value
            else:
                fields[name] = value
        raise EOFError("stream ended")

    async def take(self, n: int, timeout: float = 5.0) -> list[Event]:
        return [await self.next(timeout) for _ in range(n)]

    async def until(self, kind: str, timeout: float = 5.0) -> tuple[Event, list[Event]]:
        """Read up to and including the first event of `kind`; returns it and those before."""
        seen: list[Event] = []
        async with asyncio.timeout(timeout):
            while True:
                event = await self._next()
                if event.event == kind:
                    return event, seen
                seen.append(event)


@asynccontextmanager
async def open_stream(client: httpx.AsyncClient, token: str) -> AsyncIterator[EventReader]:
    """The user's event stream on a hub's client, as a reader (200 asserted)."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    async with client.stream("GET", "/v1/me/stream", headers=headers) as response:
        assert response.status_code == 200
        yield EventReader(response)
