"""notifyhub-client's own refusals, before anything is sent: an argument pydantic refuses
(a wrong type, an unknown field, a naive datetime) is the client's `InvalidArgument`, a
`ValidationError` like the hub's 422, with `errors` named the same way and pydantic's
error chained. No hub here: the transport fails the test if a request is made."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pydantic
import pytest

from notifyhub_client import AsyncClient, Client, InvalidArgument, NotifyhubError, ValidationError

NAIVE = datetime(2026, 11, 20, 9, 15)  # the point: a time without a zone


def _never_sent(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"sent {request.method} {request.url}")


@pytest.fixture
def client() -> Iterator[Client]:
    http = httpx.Client(transport=httpx.MockTransport(_never_sent))
    with Client("http://hub.invalid", "nh_key", http_client=http) as hub:
        yield hub


CASES: list[tuple[str, Callable[[Client], Any], str, str]] = [
    ("expires_at", lambda c: c.notify("t", users=["a"], expires_at=NAIVE), "expires_at", "naive"),
    ("deliver_at", lambda c: c.notify("t", users=["a"], deliver_at=NAIVE), "deliver_at", "naive"),
    ("due_at", lambda c: c.push_delayed("q", {}, due_at=NAIVE), "due_at", "naive"),
    ("before", lambda c: c.read_all("jwt", before=NAIVE), "before", "naive"),
    ("severity", lambda c: c.notify("t", users=["a"], severity="loud"), "severity", "'info'"),
    ("actor", lambda c: c.notify("t", users=["a"], actor={"id": "a", "nmae": "A"}), "actor.nmae",
     "Extra inputs"),
    ("target", lambda c: c.send_event("r", actor={"id": "a"}, target={"id": "1"}), "target.type",
     "required"),
    ("ttl", lambda c: c.notify("t", users=["a"], ttl="soon"), "ttl", "integer"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "call", "field", "says"), CASES, ids=[c[0] for c in CASES])
def test_a_refused_argument_is_the_clients_error(
    client: Client, case: str, call: Callable[[Client], Any], field: str, says: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        call(client)
    error = refused.value
    assert isinstance(error, ValidationError) and isinstance(error, NotifyhubError)
    assert isinstance(error.__cause__, pydantic.ValidationError)
    assert error.status == 0 and error.title == "Invalid argument"
    assert error.errors is not None and error.errors[0]["field"] == field
    assert says in error.errors[0]["message"] and says in str(error)
    assert field in str(error)


def test_a_naive_datetime_is_refused_saying_why_and_an_aware_one_is_sent() -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"updated": 2})

    http = httpx.Client(transport=httpx.MockTransport(answer))
    with Client("http://hub.invalid", "nh_key", http_client=http) as hub:
        with pytest.raises(InvalidArgument, match="does not guess"):
            hub.read_all("jwt", before=NAIVE)
        assert sent == []
        aware = NAIVE.replace(tzinfo=UTC)
        assert hub.read_all("jwt", before=aware, view="ops") == 2
    [request] = sent
    assert request.headers["authorization"] == "Bearer jwt"  # the user's, not the key
    assert request.read() == b'{"before":"2026-11-20T09:15:00Z","view":"ops"}'


async def test_the_async_client_refuses_the_same_way() -> None:
    def never(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"sent {request.method} {request.url}")

    http = httpx.AsyncClient(transport=httpx.MockTransport(never))
    async with AsyncClient("http://hub.invalid", "nh_key", http_client=http) as hub:
        with pytest.raises(InvalidArgument, match="expires_at"):
            await hub.notify("t", users=["a"], expires_at=NAIVE)
