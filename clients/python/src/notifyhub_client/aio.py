"""The asyncio client: `AsyncClient`, its queues' consume loop and its stream reader."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import TypeVar

import httpx
from pydantic import PrivateAttr

from notifyhub_client._config import DEFAULT_TIMEOUT_S, configure
from notifyhub_client._http import Call, RetryPolicy, exchange, run_async
from notifyhub_client._operations import Operations
from notifyhub_client._stream import ReconnectPolicy, StreamEvent, StreamSession
from notifyhub_client.models import QueueMessage

T = TypeVar("T")
TokenSource = str | Callable[[], str] | Callable[[], Awaitable[str]]


class AsyncClient(Operations):
    """An asyncio notifyhub client for services (an API key): the same operations as
    `Client`, each awaited. Use it as an async context manager, or `await aclose()`."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        tenant: str = "default",
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.tenant = tenant
        self.retry = retry or RetryPolicy()
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        configure(self._http, base_url, api_key)

    async def _run(self, call: Call[T]) -> T:
        return await run_async(exchange(call, self.retry, self._http), self._http)

    def queue(self, name: str, *, tenant: str | None = None) -> AsyncQueue:
        """A delayed queue (the API's topic) to consume: `async for m in q.messages()`."""
        return AsyncQueue(self, name, tenant or self.tenant)

    def stream(
        self,
        token: TokenSource,
        *,
        last_event_id: str | None = None,
        reconnect: ReconnectPolicy | None = None,
    ) -> AsyncEventStream:
        """A user's inbox events, resumed across dropped connections (`token`: the user's
        JWT, or a function, plain or async, returning a fresh one for each connection)."""
        return AsyncEventStream(self._http, token, last_event_id, reconnect or ReconnectPolicy())

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class AsyncMessage(QueueMessage):
    """A message taken from a queue: process it, then `await ack()` within its `ttl_ms`."""

    _queue: AsyncQueue | None = PrivateAttr(None)

    async def ack(self) -> None:
        assert self._queue is not None
        queue = self._queue
        await queue.client.ack_message(queue.name, self.id, self.receipt, tenant=queue.tenant)


class AsyncQueue:
    def __init__(self, client: AsyncClient, name: str, tenant: str) -> None:
        self.client, self.name, self.tenant = client, name, tenant

    async def messages(
        self, *, wait: int = 30, batch: int = 10, forever: bool = True
    ) -> AsyncIterator[AsyncMessage]:
        """Long-poll (`wait` seconds, `batch` at most per poll) and yield each message;
        endless unless `forever=False` (then it ends at the first empty poll). Messages
        of a batch not acked (a `break` mid-batch) are offered again after their ttl."""
        while True:
            page = await self.client.poll_queue(self.name, wait=wait, max=batch, tenant=self.tenant)
            for taken in page:
                message = AsyncMessage.model_construct(**dict(taken))
                message._queue = self
                yield message
            if not page and not forever:
                return


class AsyncEventStream:
    """`async for` the events; `last_event_id` is where a new stream would resume."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        token: TokenSource,
        last_event_id: str | None,
        policy: ReconnectPolicy,
    ) -> None:
        self._http = http
        self._token = token
        self._session = StreamSession(last_event_id, policy)

    @property
    def last_event_id(self) -> str | None:
        return self._session.last_event_id

    async def _fresh_token(self) -> str:
        if isinstance(self._token, str):
            return self._token
        token = self._token()
        return await token if inspect.isawaitable(token) else token

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[StreamEvent]:
        session, http = self._session, self._http
        while True:
            request = session.request(http, await self._fresh_token())
            try:
                response = await http.send(request, stream=True)
                try:
                    if response.status_code != 200:
                        await response.aread()
                    delay = session.opened(response)
                    if delay is None:
                        async for line in response.aiter_lines():
                            event = session.line(line)
                            if event is not None:
                                yield event
                        delay = session.dropped()
                finally:
                    await response.aclose()
            except httpx.TransportError:
                delay = session.dropped()
            await asyncio.sleep(delay)


__all__ = ["AsyncClient", "AsyncEventStream", "AsyncMessage", "AsyncQueue"]
