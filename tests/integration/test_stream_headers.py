"""Every header the stream path parses (Authorization, Accept, Last-Event-ID, and the
`last_event_id` / `access_token` query), fuzzed against a running hub: any answer but a
5xx. Unicode digits ('²', '①', '1¹') once made `int()` raise, a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integration.test_stream import no_streams_left

DIGITS = "0123456789-abcdef\u00b2\u00b3\u00b9\u2460\u0663\u07c1\U0001d7d9"  # ²³¹①٣߁𝟙
TEXT = st.one_of(st.text(max_size=40), st.text(alphabet=DIGITS, max_size=20))


def _sendable(value: bytes) -> bytes:
    """What h11 lets through in a header value: visible ASCII, tab, obs-text (Starlette
    reads header bytes as latin-1, so b"\xb2" arrives as '²'), no edge whitespace."""
    return bytes(c for c in value if c == 9 or 32 <= c < 127 or c >= 128).strip(b" \t")


def _value(text: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """Bytes of a header value: text as latin-1 or UTF-8, or any bytes."""
    latin1 = text.map(lambda s: s.encode("latin-1", "ignore"))
    utf8 = text.map(str.encode)
    return st.one_of(latin1, utf8, st.binary(max_size=40)).map(_sendable)


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    auth=st.one_of(st.none(), st.just("valid"), _value(st.text(max_size=60))),
    accept=st.one_of(st.none(), _value(st.text(max_size=30))),
    last_event_id=st.one_of(st.none(), _value(TEXT)),
    query=st.one_of(st.none(), TEXT),
    access_token=st.one_of(st.none(), st.text(max_size=30)),
)
async def test_stream_headers_never_answer_5xx(
    hub: Any,
    make_token: Any,
    auth: bytes | str | None,
    accept: bytes | None,
    last_event_id: bytes | None,
    query: str | None,
    access_token: str | None,
) -> None:
    headers: list[tuple[bytes, bytes]] = []
    if auth == "valid":
        headers.append((b"authorization", f"Bearer {make_token('fuzz')}".encode()))
    elif isinstance(auth, bytes):
        headers.append((b"authorization", auth))
    if accept is not None:
        headers.append((b"accept", accept))
    if last_event_id is not None:
        headers.append((b"last-event-id", last_event_id))
    params = {k: v for k, v in (("last_event_id", query), ("access_token", access_token)) if v}
    async with (
        httpx.AsyncClient(base_url=hub.base_url, timeout=10) as client,
        client.stream("GET", "/v1/me/stream", headers=headers, params=params) as response,
    ):
        assert response.status_code < 500, await response.aread()
        if response.status_code != 200 and not (await response.aread()).startswith(b"Invalid"):
            # (a request the HTTP server itself refuses never reaches the hub)
            assert response.headers["content-type"] == "application/problem+json"
    await no_streams_left(hub)


async def test_unicode_digits_are_a_422_in_the_header_and_the_query(
    hub: Any, make_token: Any
) -> None:
    auth = (b"authorization", f"Bearer {make_token('digits')}".encode())
    for value in ("²", "①", "1¹"):
        header = await hub.client.get(
            "/v1/me/stream", headers=[auth, (b"last-event-id", value.encode("utf-8"))]
        )
        query = await hub.client.get(
            "/v1/me/stream", headers=[auth], params={"last_event_id": value}
        )
        assert (header.status_code, query.status_code) == (422, 422)
        assert "last_event_id" in query.json()["detail"]
    latin1 = await hub.client.get("/v1/me/stream", headers=[auth, (b"last-event-id", b"\xb2")])
    assert latin1.status_code == 422
    assert latin1.headers["content-type"] == "application/problem+json"
