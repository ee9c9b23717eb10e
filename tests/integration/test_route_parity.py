"""One definition per route: the hot routes' entries (api/fastpath.py) answer as the
FastAPI routes do.

Every request goes to two hubs on the same Redis and database: one as served, one whose
`HotRoutes` has no routes, where the FastAPI routes answer everything.
Their answers are compared:
- the status;
- every response header except `date` (the second it was sent) and `server` (uvicorn's
  banner): so content-type, content-length, cache-control, x-accel-buffering,
  retry-after, www-authenticate and the CORS headers (both hubs allow one origin and
  every request comes from it);
- the body: JSON with the generated notification `id` normalised; for a stream, its
  `retry:` and its first event (the counts).
A spy records that the fast hub's fast path did answer the requests it is meant to take
(a parity test whose requests all fell through to FastAPI would prove nothing), and the
last tests show that a one-header or one-field difference between the paths fails it.

One difference is known and left: a publish with a bad key *and* a body that is not JSON
is a 401 with the fast path (it authenticates before it reads the body), a 422 from
FastAPI alone (which parses the body before it solves any dependency). Served, the hub
always answers the 401; the difference is reachable only with the hot routes cleared.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from notifyhub.api import fastpath
from notifyhub.api.app import create_app
from notifyhub.api.routers import notifications, stream
from notifyhub.db.models import Escalation
from notifyhub.settings import Settings
from support.sse import EventReader
from support.tls import TEST_TLS

ORIGIN = "https://app.example"
IGNORED_HEADERS = frozenset({"date", "server"})
MAX_BODY_BYTES = 4096


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, list[str]]
    body: Any


@dataclass
class Hubs:
    fast: Any
    routed: Any
    served: list[str] = field(default_factory=list)
    """What the fast paths answered: `publish`, `publish:handed-on`, `stream`."""


def differences(fast: Answer, routed: Answer) -> list[str]:
    """What differs between the two answers, one line per status, header or body."""
    found = [f"status: {fast.status} != {routed.status}"] if fast.status != routed.status else []
    for name in sorted(fast.headers.keys() | routed.headers.keys()):
        mine, theirs = fast.headers.get(name), routed.headers.get(name)
        if mine != theirs:
            found.append(f"header {name}: {mine} != {theirs}")
    if fast.body != routed.body:
        found.append(f"body: {fast.body!r} != {routed.body!r}")
    return found


def _headers(response: httpx.Response) -> dict[str, list[str]]:
    kept: dict[str, list[str]] = {}
    for name, value in response.headers.multi_items():
        if name.lower() not in IGNORED_HEADERS:
            kept.setdefault(name.lower(), []).append(value)
    return kept


def _json(response: httpx.Response) -> Any:
    body = response.json() if response.content else None
    if isinstance(body, dict) and isinstance(body.get("id"), str):
        body = {**body, "id": "<id>"}
    return body


def _answer(response: httpx.Response, body: Any) -> Answer:
    return Answer(response.status_code, _headers(response), body)


def _key(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Origin": ORIGIN}


async def publish(hub: Any, headers: dict[str, str], **request: Any) -> Answer:
    response = await hub.client.post("/v1/notifications", headers=headers, **request)
    return _answer(response, _json(response))


async def open_stream(hub: Any, headers: dict[str, str], params: dict[str, str]) -> Answer:
    """The stream's answer: a problem's JSON, or the `retry:` and first event of a 200."""
    async with (
        httpx.AsyncClient(
            base_url=hub.base_url, timeout=httpx.Timeout(10.0), verify=TEST_TLS
        ) as client,
        client.stream("GET", "/v1/me/stream", headers=headers, params=params) as response,
    ):
        if response.status_code != 200:
            await response.aread()
            return _answer(response, _json(response))
        reader = EventReader(response)
        first = await reader.next()
        return _answer(response, {"retry": reader.retry, "first": (first.event, first.data)})


async def both(hubs: Hubs, ask: Callable[[Any], Awaitable[Answer]]) -> tuple[Answer, Answer]:
    return await ask(hubs.fast), await ask(hubs.routed)


def assert_same(fast: Answer, routed: Answer) -> None:
    assert differences(fast, routed) == [], (fast, routed)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    limits = settings.limits.model_copy(
        update={"streams_per_user": 1, "max_body_bytes": MAX_BODY_BYTES}
    )
    return settings.model_copy(update={"cors_origins": [ORIGIN], "limits": limits})


def routed_app(settings: Settings) -> fastpath.HubApp:
    """A hub whose FastAPI routes answer every request (no hot routes)."""
    app = create_app(settings)
    assert app.hot is not None
    app.hot.routes.clear()
    return app


@pytest.fixture
async def hubs(settings: Settings, start_hub: Any) -> AsyncIterator[Hubs]:
    async with start_hub(settings) as fast, start_hub(settings, routed_app(settings)) as slow:
        yield Hubs(fast, slow)


@pytest.fixture
def spied(hubs: Hubs, monkeypatch: pytest.MonkeyPatch) -> Hubs:
    """`hubs`, recording in `served` what the fast paths answered."""
    serve_publish, serve_stream = notifications.serve, stream.serve

    async def publish_spy(request: Request) -> Response | None:
        response = await serve_publish(request)
        hubs.served.append("publish" if response is not None else "publish:handed-on")
        return response

    async def stream_spy(request: Request) -> Any:
        hubs.served.append("stream")
        return await serve_stream(request)

    monkeypatch.setattr(notifications, "serve", publish_spy)
    monkeypatch.setattr(stream, "serve", stream_spy)
    return hubs


VALID = {"recipients": {"users": ["parity-ann"]}, "title": "same"}


async def test_a_valid_publish(spied: Hubs, publish_key: str) -> None:
    fast, routed = await both(spied, lambda hub: publish(hub, _key(publish_key), json=VALID))
    assert fast.status == 202 and fast.body["recipients"] == 1
    assert_same(fast, routed)
    assert spied.served == ["publish"]


async def test_a_publish_with_escalation_schedules_the_same_steps(
    spied: Hubs, publish_key: str, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    steps = [{"after_s": 600, "unless": "read", "channel": "email"}]
    body = {**VALID, "escalate": steps}
    fast, routed = await both(spied, lambda hub: publish(hub, _key(publish_key), json=body))
    assert fast.status == 202
    assert_same(fast, routed)
    async with sessionmaker() as session:  # (the answers' ids are normalised)
        rows = await session.scalars(select(Escalation).where(Escalation.user_id == "parity-ann"))
        found = [(r.step, r.channel, r.unless) for r in rows]
    assert found == [(1, "email", "read")] * 2  # one step each


@pytest.mark.parametrize(
    ("key", "scope", "status"), [("nh_not_a_key", None, 401), (None, "consume", 403)]
)
async def test_a_publish_with_a_bad_key_or_scope(
    spied: Hubs, create_key: Any, key: str | None, scope: str | None, status: int
) -> None:
    key = key or await create_key("parity", scope)
    fast, routed = await both(spied, lambda hub: publish(hub, _key(key), json=VALID))
    assert fast.status == status
    assert_same(fast, routed)


@pytest.mark.parametrize(
    "request_",
    [
        {"json": {"recipients": {"users": ["a"]}}},  # no title
        {"json": {**VALID, "extra": 1}},
        {"content": b"{not json", "headers": {"content-type": "application/json"}},
        {"json": VALID, "headers": {"idempotency-key": "k" * 201}},
        {"json": VALID, "headers": {"idempotency-key": ""}},
        {"json": {**VALID, "recipients": {"groups": ["parity-no-such-group"]}}},
        {"json": {**VALID, "ttl": "3600"}},
        {"json": {**VALID, "thread_key": "k", "thread_window_s": "60"}},
        {"json": {**VALID, "title": "x" * 300}},
        {"content": b'{"title": "x"', "headers": {"content-type": "text/plain"}},
        {"json": {**VALID, "digest": {"key": "k", "window_s": "60"}}},
        {"json": {**VALID, "digest": {"key": "k", "at": "09:00", "mode": "sliding"}}},
        {"json": {**VALID, "escalate": [{"after_s": 0, "unless": "seen", "channel": "push"}]}},
    ],
    ids=[
        "missing-field",
        "extra-field",
        "not-json",
        "long-idempotency-key",
        "empty-idempotency-key",
        "unknown-group",
        "number-in-a-string",
        "thread-window-in-a-string",
        "long-title",
        "not-a-json-type",
        "digest-window-in-a-string",
        "digest-at-sliding",
        "escalate-too-soon",
    ],
)
async def test_a_publish_refused_with_422(
    spied: Hubs, publish_key: str, request_: dict[str, Any]
) -> None:
    request = dict(request_)
    headers = {**_key(publish_key), **request.pop("headers", {})}
    fast, routed = await both(spied, lambda hub: publish(hub, headers, **request))
    assert fast.status == 422, fast.body
    assert_same(fast, routed)


async def test_a_publish_with_a_digest(spied: Hubs, publish_key: str) -> None:
    body = {**VALID, "digest": {"key": "parity", "window_s": 60, "first": "now"}}
    fast, routed = await both(spied, lambda hub: publish(hub, _key(publish_key), json=body))
    assert fast.status == 202, fast.body
    assert_same(fast, routed)
    assert spied.served == ["publish"]


async def test_a_publish_without_a_content_type_is_json(spied: Hubs, publish_key: str) -> None:
    body = b'{"recipients": {"users": ["parity-ann"]}, "title": "untyped"}'
    fast, routed = await both(spied, lambda hub: publish(hub, _key(publish_key), content=body))
    assert fast.status == 202, fast.body
    assert_same(fast, routed)
    assert spied.served == ["publish"]


async def test_a_publish_with_a_user_token_names_the_credential(
    spied: Hubs, make_token: Any
) -> None:
    token = make_token("parity-ann")
    fast, routed = await both(spied, lambda hub: publish(hub, _key(token), json=VALID))
    assert fast.status == 401 and "the credential sent is a user token" in fast.body["detail"]
    assert_same(fast, routed)


async def test_an_oversized_publish(spied: Hubs, publish_key: str) -> None:
    body = {**VALID, "body": "x" * MAX_BODY_BYTES}
    fast, routed = await both(spied, lambda hub: publish(hub, _key(publish_key), json=body))
    assert fast.status == 413
    assert_same(fast, routed)
    assert spied.served == []  # refused by the limits both paths share, before either


async def test_an_idempotent_repeat_answers_the_first_response(
    spied: Hubs, publish_key: str
) -> None:
    async def twice(hub: Any) -> Answer:
        headers = {**_key(publish_key), "Idempotency-Key": f"parity-{hub.base_url}"}
        first = await hub.client.post("/v1/notifications", json=VALID, headers=headers)
        repeat = await hub.client.post("/v1/notifications", json=VALID, headers=headers)
        assert (repeat.status_code, repeat.json()) == (first.status_code, first.json())
        return _answer(repeat, _json(repeat))

    fast, routed = await both(spied, twice)
    assert fast.status == 202
    assert_same(fast, routed)
    assert spied.served == ["publish", "publish"]


async def test_a_stream_opens_alike(spied: Hubs, make_token: Any) -> None:
    headers = {"Authorization": f"Bearer {make_token('parity-sam')}", "Origin": ORIGIN}
    fast, routed = await both(spied, lambda hub: open_stream(hub, headers, {}))
    assert fast.status == 200 and fast.body["first"][0] == "counts"
    assert fast.headers["content-type"][0].startswith("text/event-stream")
    assert_same(fast, routed)
    assert spied.served == ["stream"]


async def _stream_token(hub: Any, user_token: str) -> str:
    minted = await hub.client.post(
        "/v1/me/stream-tokens", headers={"Authorization": f"Bearer {user_token}"}
    )
    return str(minted.json()["token"])


@pytest.mark.parametrize(
    "misuse", ["no-token", "user-token-in-query", "stream-token-in-header", "bad-token"]
)
async def test_a_stream_without_a_valid_token(spied: Hubs, make_token: Any, misuse: str) -> None:
    user = make_token("parity-tom")
    stream_token = await _stream_token(spied.fast, user)
    headers, params = {
        "no-token": ({}, {}),
        "user-token-in-query": ({}, {"access_token": user}),
        "stream-token-in-header": ({"Authorization": f"Bearer {stream_token}"}, {}),
        "bad-token": ({}, {"access_token": "not-a-token"}),
    }[misuse]
    headers = {**headers, "Origin": ORIGIN}
    fast, routed = await both(spied, lambda hub: open_stream(hub, headers, params))
    assert fast.status == 401
    assert_same(fast, routed)
    assert spied.served == ["stream"]


@pytest.mark.parametrize(
    ("header", "query"),
    [("abc", None), ("1" * 40, None), (None, "1-xyz"), (None, "9" * 40), (None, "²")],
)
async def test_a_stream_with_a_bad_last_event_id(
    spied: Hubs, make_token: Any, header: str | None, query: str | None
) -> None:
    """The length too: FastAPI's own `max_length` once answered a different 422."""
    headers = {"Authorization": f"Bearer {make_token('parity-una')}", "Origin": ORIGIN}
    if header is not None:
        headers["Last-Event-ID"] = header
    params = {} if query is None else {"last_event_id": query}
    fast, routed = await both(spied, lambda hub: open_stream(hub, headers, params))
    assert fast.status == 422, fast.body
    assert_same(fast, routed)


async def test_a_stream_past_the_per_user_cap(spied: Hubs, make_token: Any) -> None:
    headers = {"Authorization": f"Bearer {make_token('parity-cap')}", "Origin": ORIGIN}

    async def second_stream(hub: Any) -> Answer:
        async with (
            httpx.AsyncClient(
                base_url=hub.base_url, timeout=httpx.Timeout(10.0), verify=TEST_TLS
            ) as client,
            client.stream("GET", "/v1/me/stream", headers=headers) as held,
        ):
            assert held.status_code == 200
            await EventReader(held).next()  # attached: the cap (1) is reached
            return await open_stream(hub, headers, {})

    fast, routed = await both(spied, second_stream)
    assert fast.status == 429 and fast.headers["retry-after"] == ["3"]
    assert_same(fast, routed)


# The test has teeth: one path changed by one header or one field fails the comparison.


def _no_store(response: Response) -> Response:
    response.headers["cache-control"] = "no-store"
    return response


def _count_one_more(response: Response) -> Response:
    body = bytes(response.body).replace(b'"recipients":1', b'"recipients":2')
    return Response(body, 202, media_type="application/json")


def _changed(serve: Callable[[Request], Awaitable[Any]], change: Callable[[Any], Any]) -> Any:
    async def changed(request: Request) -> Any:
        return change(await serve(request))

    return changed


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_no_store, "header cache-control: ['no-store'] != None"),
        (_count_one_more, "body: {'id': '<id>', 'recipients': 2,"),
    ],
    ids=["header", "field"],
)
async def test_a_publish_that_differs_fails_the_comparison(
    hubs: Hubs,
    publish_key: str,
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[Any], Any],
    expected: str,
) -> None:
    monkeypatch.setattr(notifications, "serve", _changed(notifications.serve, change))
    fast, routed = await both(hubs, lambda hub: publish(hub, _key(publish_key), json=VALID))
    found = differences(fast, routed)
    assert len(found) == 1 and found[0].startswith(expected), found
    with pytest.raises(AssertionError):
        assert_same(fast, routed)


async def test_a_stream_that_differs_fails_the_comparison(
    hubs: Hubs, make_token: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path's stream, with its proxy-buffering header changed on the wire."""
    opened = fastpath.StreamEntry._stream

    async def buffered(self: Any, scope: Scope, receive: Receive, send: Send) -> None:
        async def changed(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, b"yes" if k == b"x-accel-buffering" else v) for k, v in message["headers"]
                ]
                message = {**message, "headers": headers}
            await send(message)

        await opened(self, scope, receive, changed)

    monkeypatch.setattr(fastpath.StreamEntry, "_stream", buffered)
    headers = {"Authorization": f"Bearer {make_token('parity-ted')}", "Origin": ORIGIN}
    fast, routed = await both(hubs, lambda hub: open_stream(hub, headers, {}))
    assert differences(fast, routed) == ["header x-accel-buffering: ['yes'] != ['no']"]
