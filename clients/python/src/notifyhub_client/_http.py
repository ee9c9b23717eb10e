"""The one request/response layer, without I/O: what to send, when to retry, how to read
the answer. `Client` and `AsyncClient` only perform the steps `exchange` asks for (send
this request, sleep this long), so both behave the same by construction.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from notifyhub_client.errors import HubUnreachable, UnexpectedAnswer, error_for, retry_after

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

RETRY_STATUSES = frozenset({429, 503})
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Failures before the request left: retrying can never do anything twice."""
MAYBE_SENT = (
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
    httpx.ReadTimeout,
    httpx.WriteTimeout,
)
"""Failures after the request may have reached the hub: retried for idempotent calls only."""


def segment(value: str) -> str:
    """One path segment, percent-encoded (a name may hold `:` or `.`, never `/`)."""
    return quote(value, safe="")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one logical call tries: at most `max_attempts` requests within
    `max_total_s`, waiting `Retry-After` when the hub names it, else an exponential
    backoff from `backoff_s` to `max_backoff_s`, jittered (half fixed, half random)."""

    max_attempts: int = 5
    max_total_s: float = 30.0
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0

    def backoff(self, retry: int, rng: Callable[[], float] = random.random) -> float:
        """The wait before retry number `retry` (1, 2, ...) when the hub named none."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2.0 ** (retry - 1))
        return ceiling / 2 + rng() * ceiling / 2


NO_RETRIES = RetryPolicy(max_attempts=1)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One logical API call: the request (built once, so its `Idempotency-Key` is the
    same on every retry) and how to read a successful answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, str | int] | None = None
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    idempotent: bool = True
    """Safe to repeat after the hub may have acted (503, a reset connection)."""
    timeout: float | None = None
    """Read timeout for this call (a long poll's), else the client's."""

    def build(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        timeout: Any = httpx.USE_CLIENT_DEFAULT
        if self.timeout is not None:
            timeout = httpx.Timeout(http.timeout.connect, read=self.timeout)
        return http.build_request(
            self.method,
            self.path,
            params=self.params,
            json=self.json,
            headers=self.headers,
            timeout=timeout,
        )


def model(cls: type[M]) -> Callable[[httpx.Response], M]:
    def parse(response: httpx.Response) -> M:
        return cls.model_validate_json(response.content)

    return parse


def model_list(cls: type[M], key: str) -> Callable[[httpx.Response], list[M]]:
    def parse(response: httpx.Response) -> list[M]:
        return [cls.model_validate(item) for item in response.json()[key]]

    return parse


def nothing(response: httpx.Response) -> None:
    return None


Step = httpx.Request | float
"""What the caller does next: send this request, or sleep this many seconds."""
Outcome = httpx.Response | httpx.TransportError | None


class Attempts:
    """One logical call's retry budget: whether (and after how long) to try again."""

    def __init__(
        self,
        policy: RetryPolicy,
        idempotent: bool,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy
        self.idempotent = idempotent
        self.clock = clock
        self.rng = rng
        self.started = clock()
        self.made = 1

    def after_response(self, response: httpx.Response) -> float | None:
        """The wait before retrying this answer, or None: the answer stands."""
        status = response.status_code
        if status not in RETRY_STATUSES or (status != 429 and not self.idempotent):
            return None  # a 429 was refused before anything was done: always safe
        return self._next(retry_after(response))

    def after_error(self, error: httpx.TransportError) -> float | None:
        """The wait before retrying after no answer, or None: give up."""
        if isinstance(error, NOT_SENT) or (self.idempotent and isinstance(error, MAYBE_SENT)):
            return self._next(None)
        return None

    def _next(self, asked: float | None) -> float | None:
        if self.made >= self.policy.max_attempts:
            return None
        wait = self.policy.backoff(self.made, self.rng)
        if asked is not None:  # honoured, plus a little jitter so callers do not align
            wait = asked + self.rng() * min(asked, 1.0) * 0.1
        if self.clock() - self.started + wait > self.policy.max_total_s:
            return None
        self.made += 1
        return wait


def exchange(
    call: Call[T], policy: RetryPolicy, http: httpx.Client | httpx.AsyncClient
) -> Generator[Step, Outcome, T]:
    """Drive one call: yields a request to send (receiving its response, or the transport
    error) or a delay to sleep (receiving None); returns the parsed answer or raises the
    typed error (`errors.py`) once no retry is left."""
    request = call.build(http)
    attempts = Attempts(policy, call.idempotent)
    while True:
        outcome = yield request
        if isinstance(outcome, httpx.Response):
            delay = attempts.after_response(outcome)
            if delay is None:
                if outcome.is_success:
                    return _parsed(call, outcome)
                raise error_for(outcome)
        else:
            assert outcome is not None
            delay = attempts.after_error(outcome)
            if delay is None:
                raise HubUnreachable(outcome) from outcome
        yield delay


def _parsed(call: Call[T], response: httpx.Response) -> T:
    """A success's answer; one the client cannot read raises `UnexpectedAnswer`."""
    try:
        return call.parse(response)
    except (ValueError, KeyError, TypeError) as error:  # pydantic's errors are ValueErrors
        raise UnexpectedAnswer.of(error, response) from error


def run_sync(steps: Generator[Step, Outcome, T], http: httpx.Client) -> T:
    """Perform `exchange`'s steps with a blocking client."""
    outcome: Outcome = None
    try:
        while True:
            step = steps.send(outcome)
            if isinstance(step, httpx.Request):
                try:
                    outcome = http.send(step)
                except httpx.TransportError as error:
                    outcome = error
            else:
                time.sleep(step)
                outcome = None
    except StopIteration as stop:
        result: T = stop.value
        return result


async def run_async(steps: Generator[Step, Outcome, T], http: httpx.AsyncClient) -> T:
    """Perform `exchange`'s steps with an asyncio client."""
    outcome: Outcome = None
    try:
        while True:
            step = steps.send(outcome)
            if isinstance(step, httpx.Request):
                try:
                    outcome = await http.send(step)
                except httpx.TransportError as error:
                    outcome = error
            else:
                await asyncio.sleep(step)
                outcome = None
    except StopIteration as stop:
        result: T = stop.value
        return result
