"""The blocking client: `Client`, its queues' consume loop and its stream reader."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import closing
from types import TracebackType
from typing import TypeVar

import httpx
from pydantic import PrivateAttr

from notifyhub_client._config import DEFAULT_TIMEOUT_S, configure
from notifyhub_client._http import Call, RetryPolicy, exchange, run_sync
from notifyhub_client._operations import Operations
from notifyhub_client._stream import ReconnectPolicy, StreamEvent, StreamSession
from notifyhub_client.models import QueueMessage

T = TypeVar("T")


class Client(Operations):
    """A blocking notifyhub client for services (an API key).

    Every operation retries 429, 503 and connection failures per `retry` (idempotent
    calls only where the hub may have acted); publishes carry an `Idempotency-Key`.
    Errors are `notifyhub_client.errors` exceptions. Use it as a context manager, or
    `close()` it."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        tenant: str = "default",
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.tenant = tenant
        self.retry = retry or RetryPolicy()
        self._http = http_client or httpx.Client(timeout=timeout)
        configure(self._http, base_url, api_key)

    def _run(self, call: Call[T]) -> T:
        return run_sync(exchange(call, self.retry, self._http), self._http)

    def queue(self, name: str, *, tenant: str | None = None) -> Queue:
        """A delayed queue (the API's topic) to consume: `for m in queue.messages()`."""
        return Queue(self, name, tenant or self.tenant)

    def stream(
        self,
        token: str | Callable[[], str],
        *,
        last_event_id: str | None = None,
        reconnect: ReconnectPolicy | None = None,
    ) -> EventStream:
        """A user's inbox events, resumed across dropped connections (`token`: the user's
        JWT, or a function returning a fresh one for each connection)."""
        return EventStream(self._http, token, last_event_id, reconnect or ReconnectPolicy())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Message(QueueMessage):
    """A message taken from a queue: process it, then `ack()` it within its `ttl_ms`."""

    _queue: Queue | None = PrivateAttr(None)

    def ack(self) -> None:
        assert self._queue is not None
        queue = self._queue
        queue.client.ack_message(queue.name, self.id, self.receipt, tenant=queue.tenant)


class Queue:
    def __init__(self, client: Client, name: str, tenant: str) -> None:
        self.client, self.name, self.tenant = client, name, tenant

    def messages(
        self, *, wait: int = 30, batch: int = 10, forever: bool = True
    ) -> Iterator[Message]:
        """Long-poll (`wait` seconds, `batch` at most per poll) and yield each message;
        endless unless `forever=False` (then it ends at the first empty poll). Messages
        of a batch not acked (a `break` mid-batch) are offered again after their ttl."""
        while True:
            page = self.client.poll_queue(self.name, wait=wait, max=batch, tenant=self.tenant)
            for taken in page:
                message = Message.model_construct(**dict(taken))
                message._queue = self
                yield message
            if not page and not forever:
                return


class EventStream:
    """Iterate for events; `last_event_id` is where a new stream would resume."""

    def __init__(
        self,
        http: httpx.Client,
        token: str | Callable[[], str],
        last_event_id: str | None,
        policy: ReconnectPolicy,
    ) -> None:
        self._http = http
        self._token = token
        self._session = StreamSession(last_event_id, policy)

    @property
    def last_event_id(self) -> str | None:
        return self._session.last_event_id

    def __iter__(self) -> Iterator[StreamEvent]:
        session, http = self._session, self._http
        while True:
            token = self._token if isinstance(self._token, str) else self._token()
            try:
                with closing(http.send(session.request(http, token), stream=True)) as response:
                    if response.status_code != 200:
                        response.read()
                    delay = session.opened(response)
                    if delay is None:
                        for line in response.iter_lines():
                            event = session.line(line)
                            if event is not None:
                                yield event
                        delay = session.dropped()
            except httpx.TransportError:
                delay = session.dropped()
            time.sleep(delay)


__all__ = ["Client", "EventStream", "Message", "Queue"]
