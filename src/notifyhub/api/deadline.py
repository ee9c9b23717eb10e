"""Every request answered within its deadline, whatever Redis and PostgreSQL do.

Each store call has its own timeout (a Redis command 2 s, a statement 3 s, a connect or
a pool wait 1-2 s), but a request makes several in turn: waits on a frozen Redis, a row
lock held by a request stuck behind it and a stale key's check added up to 7.6 s. The
deadline is one budget for all of them (`Settings.request_deadline_s`): when it runs
out before the response starts, the request's work is cancelled where it waits and the
client gets a 503 problem+json naming the store it was waiting on, with `Retry-After`.

Cancelling leaves nothing half-written: the request's transaction is rolled back
(SQLAlchemy invalidates a connection interrupted mid-statement, and the server rolls it
back when the engine aborts it, db/engine.py), and a Redis command or script ran whole
or not at all (the interrupted connection is dropped). What a request had already
committed stays committed, as when a store fails after it.

The deadline ends when the response starts: an event stream is bounded while it opens,
not while it lives. Work that makes progress renews it (a long poll's rounds, a big
fan-out's batches: notifyhub/deadline.py), so it bounds waiting, not working.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notifyhub.api.errors import unavailable
from notifyhub.deadline import CURRENT, Deadline
from notifyhub.metrics import Metrics
from notifyhub.outages import NAMES, waited_on

log = logging.getLogger(__name__)


def late_answer(
    scope: Scope, exc: TimeoutError, seconds: float, metrics: Metrics | None
) -> Response:
    """The 503 of a request its deadline cut short, naming the store it waited on."""
    dependency = waited_on(exc)
    name = NAMES[dependency] if dependency is not None else "a backing service"
    log.warning(
        "%s %s cut short by its %g s deadline, waiting on %s",
        scope["method"],
        scope["path"],
        seconds,
        name,
    )
    return unavailable(dependency, metrics)


class RequestDeadline:
    """Pure ASGI middleware: the request must start its response within `seconds`;
    it may renew the deadline (`notifyhub.deadline.renew`, a long poll's rounds).

    Inside the request limits, which read the body first: the deadline bounds the
    request's work, not a client's upload. Requests `exempt` names bound themselves
    (an event stream, api/fastpath.py: this frame would live as long as the stream)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        seconds: float,
        metrics: Metrics | None = None,
        exempt: Callable[[Scope], bool] = lambda scope: False,
    ) -> None:
        self.app = app
        self.seconds = seconds
        self.metrics = metrics
        self.exempt = exempt

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http" or self.exempt(scope):
            return self.app(scope, receive, send)
        return self._bounded(scope, receive, send)

    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        timeout = asyncio.timeout(self.seconds)
        deadline = Deadline(timeout, self.seconds)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                deadline.lift()
            await send(message)

        token = CURRENT.set(deadline)
        try:
            async with timeout:
                await self.app(scope, receive, sending)
        except TimeoutError as exc:
            if not timeout.expired() or deadline.lifted:
                raise  # not ours, or too late to answer
            answer = late_answer(scope, exc, self.seconds, self.metrics)
            await answer(scope, receive, send)
        finally:
            CURRENT.reset(token)
