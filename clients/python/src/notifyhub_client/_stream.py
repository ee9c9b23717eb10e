"""The inbox stream (`GET /v1/me/stream`) without I/O: the request, the Server-Sent Events
parser, typed events, and when to reconnect. `Client.stream` and `AsyncClient.stream`
only open connections and feed lines in.

Resuming: every event's `id:` (`<seq>-<epoch>`) is kept verbatim and sent back as
`Last-Event-ID` on the next connection, so the hub replays exactly what was missed (or
sends one `reset` when the gap is too old: reload the list then).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import httpx
import pydantic

from notifyhub_client.errors import error_for, retry_after
from notifyhub_client.models import Counts, Deleted, InboxUpdate, Notification

STREAM_PATH = "/v1/me/stream"


@dataclass(frozen=True, slots=True)
class NotificationEvent:
    id: str
    data: Notification
    type: Literal["notification"] = "notification"


@dataclass(frozen=True, slots=True)
class UpdateEvent:
    id: str
    data: InboxUpdate
    type: Literal["update"] = "update"


@dataclass(frozen=True, slots=True)
class DeleteEvent:
    id: str
    data: Deleted
    type: Literal["delete"] = "delete"


@dataclass(frozen=True, slots=True)
class CountsEvent:
    id: str
    data: Counts
    type: Literal["counts"] = "counts"


@dataclass(frozen=True, slots=True)
class ResetEvent:
    """The gap was older than the hub's change log (or Redis lost the data): the counts
    are current; reload the list."""

    id: str
    data: Counts
    type: Literal["reset"] = "reset"


StreamEvent = NotificationEvent | UpdateEvent | DeleteEvent | CountsEvent | ResetEvent


@dataclass(frozen=True)
class ReconnectPolicy:
    """Reconnects back off exponentially from the hub's `retry:` (else `initial_s`) to
    `max_s`, jittered; a connection that stays silent `read_timeout_s` (the hub pings
    every 15 s) is taken as dead."""

    initial_s: float = 0.5
    max_s: float = 15.0
    read_timeout_s: float = 45.0


class StreamProtocolError(ValueError):
    """An event whose data is not what its type promises."""


def _parse(event: str, event_id: str, data: str) -> StreamEvent | None:
    try:
        if event == "notification":
            return NotificationEvent(event_id, Notification.model_validate_json(data))
        if event == "update":
            return UpdateEvent(event_id, InboxUpdate.model_validate_json(data))
        if event == "delete":
            return DeleteEvent(event_id, Deleted.model_validate_json(data))
        if event == "counts":
            return CountsEvent(event_id, Counts.model_validate_json(data))
        if event == "reset":
            return ResetEvent(event_id, Counts.model_validate_json(data))
    except pydantic.ValidationError as exc:
        raise StreamProtocolError(f"{event} event {event_id}: {exc}") from exc
    return None  # an event type this client does not know: skipped (its id still counts)


class StreamSession:
    """One logical stream across connections: where it is, and when to reconnect."""

    def __init__(
        self,
        last_event_id: str | None,
        policy: ReconnectPolicy,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.last_event_id = last_event_id
        self.policy = policy
        self.rng = rng
        self.retry_s: float | None = None
        self.failures = 0
        self._reset_buffers()

    def _reset_buffers(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id = self.last_event_id

    def request(self, http: httpx.Client | httpx.AsyncClient, token: str) -> httpx.Request:
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "text/event-stream",
            "Cache-Control": "no-cache",
        }
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        timeout = httpx.Timeout(http.timeout.connect, read=self.policy.read_timeout_s)
        return http.build_request("GET", STREAM_PATH, headers=headers, timeout=timeout)

    def opened(self, response: httpx.Response) -> float | None:
        """None when the stream is open (feed its lines to `line`); else the wait before
        reconnecting (429, 5xx). Other answers (401, 403, 422) raise: no retry fixes them.
        A refused response's body must have been read."""
        self._reset_buffers()
        if response.status_code == 200:
            self.failures = 0
            return None
        if response.status_code == 429 or response.status_code >= 500:
            return self._delay(retry_after(response))
        raise error_for(response)

    def dropped(self) -> float:
        """The connection ended or failed: the wait before the next one."""
        self._reset_buffers()
        return self._delay(None)

    def _delay(self, asked: float | None) -> float:
        base = self.retry_s if self.retry_s is not None else self.policy.initial_s
        ceiling = min(self.policy.max_s, base * 2.0**self.failures)
        self.failures += 1
        wait = ceiling / 2 + self.rng() * ceiling / 2
        return max(wait, asked) if asked is not None else wait

    def line(self, line: str) -> StreamEvent | None:
        """Feed one line (without its end); an event when a blank line completes one."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: the hub's keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_s = int(value) / 1000
        return None

    def _dispatch(self) -> StreamEvent | None:
        # As EventSource does: the id counts even for an event without data or of an
        # unknown type, so a resume never replays it.
        self.last_event_id = self._id
        event, data = self._event or "message", "\n".join(self._data)
        self._event, self._data = "", []
        if not data:
            return None
        return _parse(event, self.last_event_id or "", data)
