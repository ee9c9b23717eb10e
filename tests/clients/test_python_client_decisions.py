"""notifyhub-client's decisions without I/O: when a call is retried and for how long, and
how stream lines become events. (What a hub can be made to answer is tested against a
real one in test_python_client.py; a 503 and its Retry-After are checked here.)"""

from __future__ import annotations

import httpx
import pytest

from notifyhub_client import CountsEvent, NotificationEvent, ReconnectPolicy, RetryPolicy
from notifyhub_client._http import Attempts
from notifyhub_client._stream import StreamSession

REQUEST = httpx.Request("POST", "http://hub/v1/notifications")


def _answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers, request=REQUEST)


def _attempts(idempotent: bool, policy: RetryPolicy | None = None) -> tuple[Attempts, list[float]]:
    now = [0.0]
    attempts = Attempts(policy or RetryPolicy(), idempotent, clock=lambda: now[0], rng=lambda: 0.5)
    return attempts, now


@pytest.mark.parametrize(
    ("status", "idempotent", "retried"),
    [(429, False, True), (503, True, True), (503, False, False), (500, True, False)],
)
def test_which_answers_are_retried(status: int, idempotent: bool, retried: bool) -> None:
    attempts, _ = _attempts(idempotent)
    assert (attempts.after_response(_answer(status)) is not None) is retried


def test_retry_after_is_honoured_and_the_budget_bounds_it() -> None:
    attempts, now = _attempts(True, RetryPolicy(max_attempts=3, max_total_s=10))
    delay = attempts.after_response(_answer(503, **{"Retry-After": "2"}))
    assert delay is not None and 2.0 <= delay <= 2.2
    now[0] = 2.0
    assert attempts.after_response(_answer(503, **{"Retry-After": "9"})) is None  # past 10 s
    assert attempts.after_response(_answer(429)) is not None  # backoff, within budget
    assert attempts.after_response(_answer(429)) is None  # the third attempt was the last


def test_retry_after_as_an_http_date() -> None:
    attempts, _ = _attempts(True)
    answer = _answer(
        429,
        **{"Retry-After": "Wed, 21 Oct 2026 07:28:03 GMT", "Date": "Wed, 21 Oct 2026 07:28:00 GMT"},
    )
    delay = attempts.after_response(answer)
    assert delay is not None and 3.0 <= delay <= 3.3


def test_connection_failures_before_and_after_sending() -> None:
    unsafe, _ = _attempts(False)
    assert unsafe.after_error(httpx.ConnectError("refused")) is not None  # never sent
    assert unsafe.after_error(httpx.RemoteProtocolError("dropped")) is None  # maybe acted on
    safe, _ = _attempts(True)
    assert safe.after_error(httpx.ReadError("reset")) is not None
    assert safe.after_error(httpx.UnsupportedProtocol("ftp")) is None  # no retry fixes it


def test_backoff_grows_jittered_up_to_its_ceiling() -> None:
    policy = RetryPolicy(backoff_s=0.2, max_backoff_s=1.0)
    assert [policy.backoff(n, rng=lambda: 1.0) for n in (1, 2, 3, 4, 5)] == [
        0.2,
        0.4,
        0.8,
        1.0,
        1.0,
    ]
    assert policy.backoff(3, rng=lambda: 0.0) == 0.4  # half fixed, half random


def test_stream_lines_become_typed_events_and_ids_are_kept_verbatim() -> None:
    session = StreamSession(None, ReconnectPolicy(), rng=lambda: 0.0)
    lines = [
        "retry: 200",
        "",
        ": ping",
        "",
        "event: notification",
        "id: 7-1a2b",
        'data: {"id": "N1", "tenant": "default", "title": "Hi",'
        ' "created_at": "2026-01-01T00:00:00Z", "expires_at": "2026-02-01T00:00:00Z"}',
        "",
        "event: counts",
        "id: 7-1a2b",
        'data: {"unread": 1, "unseen": 1, "total": 1, "seq": 7}',
        "",
        "event: someday",
        "id: 8-1a2b",
        "data: {}",
        "",
    ]
    events = [e for line in lines if (e := session.line(line)) is not None]
    assert isinstance(events[0], NotificationEvent) and events[0].data.title == "Hi"
    assert isinstance(events[1], CountsEvent) and events[1].data.seq == 7
    assert [e.id for e in events] == ["7-1a2b", "7-1a2b"]
    assert session.last_event_id == "8-1a2b"  # an unknown event's id still counts
    assert session.retry_s == 0.2
    assert session.dropped() == 0.1  # reconnects after the hub's retry (half fixed)
    request = session.request(httpx.Client(base_url="http://hub"), "jwt")
    assert request.headers["last-event-id"] == "8-1a2b"
    assert request.headers["authorization"] == "Bearer jwt"
