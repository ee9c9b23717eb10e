"""What a connection keeps and when its stream ends: the hub's HTTP protocol
(api/protocol.py) holds lists where uvicorn holds deques, and tells a stream when its
client leaves instead of a task per stream awaiting ASGI's `http.disconnect`."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest

from integration.test_stream import no_streams_left
from notifyhub.api.protocol import HubHttpProtocol
from notifyhub.settings import Settings
from support.rawhttp import stuck_stream
from support.sse import EventReader
from support.tls import TEST_TLS

_STATUS = re.compile(rb"HTTP/1\.1 (\d{3}) ")


def _address(hub: Any) -> tuple[str, int]:
    host, port = hub.base_url.removeprefix("http://").split(":")
    return host, int(port)


def _stream_request(token: str) -> bytes:
    return (
        f"GET /v1/me/stream HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()


async def test_the_hub_serves_its_own_protocol(hub: Any) -> None:
    assert hub.server.config.http is HubHttpProtocol


async def test_pipelined_requests_are_answered_in_order(hub: Any) -> None:
    """Three requests in one write: the second and third wait in the protocol's queue of
    pipelined requests (a list here) and are answered after the first, in order."""
    reader, writer = await asyncio.open_connection(*_address(hub))
    paths = ["/healthz", "/v1/no-such-route", "/healthz?again=1"]
    writer.write(b"".join(f"GET {p} HTTP/1.1\r\nHost: hub\r\n\r\n".encode() for p in paths))
    await writer.drain()
    received = b""
    try:
        async with asyncio.timeout(10):
            while len(_STATUS.findall(received)) < len(paths):
                chunk = await reader.read(65536)
                assert chunk, f"closed after {received!r}"
                received += chunk
    finally:
        writer.close()
    assert _STATUS.findall(received) == [b"200", b"404", b"200"]


async def test_streams_whose_clients_leave_while_opening_end(hub: Any, make_token: Any) -> None:
    """A client may leave before its stream has registered for the close (the first read
    is still in Redis) or after: either way the stream ends, and is counted as left.
    Uvicorn writes nothing to a closed connection and says nothing, so a stream that
    missed its client's leaving would live on, pinging no one."""
    opened = 30
    for n in range(opened):
        _, writer = await asyncio.open_connection(*_address(hub))
        writer.write(_stream_request(make_token(f"leaver-{n}")))
        await writer.drain()
        if n % 2:
            await asyncio.sleep(0.01)  # some leave after their stream opened
        writer.close()
        await writer.wait_closed()
    await no_streams_left(hub)
    ends = hub.app_state["metrics"].registry.get_sample_value(
        "notifyhub_streams_dropped_total", {"reason": "client_left"}
    )
    assert ends == opened


async def _hold_then_leave(hub: Any, token: str) -> None:
    """Open a stream, read its first event, leave; the hub's streams all end."""
    url = f"{hub.base_url}/v1/me/stream"
    async with (
        httpx.AsyncClient(timeout=10, verify=TEST_TLS) as client,
        client.stream("GET", url, headers={"Authorization": f"Bearer {token}"}) as response,
    ):
        assert (await EventReader(response).next()).event == "counts"
        assert hub.app_state["hub"].stream_count == 1
    await no_streams_left(hub)


async def test_a_held_stream_ends_when_its_client_leaves(hub: Any, make_token: Any) -> None:
    await _hold_then_leave(hub, make_token("holder"))


@pytest.mark.parametrize("http", ["h11"])
async def test_under_another_protocol_a_task_watches_for_the_close(
    settings: Settings, start_hub: Any, make_token: Any, http: str
) -> None:
    """Served by uvicorn's h11 protocol (no close callback in the scope), a stream still
    ends when its client leaves, through ASGI's `http.disconnect`."""
    async with start_hub(settings, http=http) as other:
        await _hold_then_leave(other, make_token("watched"))


async def test_a_chunk_is_written_at_once_only_while_the_client_keeps_up(
    hub: Any, make_token: Any
) -> None:
    """`write_now` (how a broadcast's announcement reaches an idle stream) writes into the
    connection only until the client stops keeping up (uvicorn's flow control pauses
    writing past its high-water mark), and not after the client left: then the event goes
    through ASGI, which waits for the client under the send timeout."""
    sock = await stuck_stream(hub.base_url, make_token("stuck-reader"))
    with sock:
        [protocol] = [
            p
            for p in hub.server.server_state.connections
            if p.cycle is not None and p.cycle.chunked_encoding and not p.cycle.response_complete
        ]
        chunk = b": filler\n" * 8192
        written = 0
        while protocol.write_now(chunk):  # the client reads nothing more
            written += 1
            assert written < 1000, "never paused"
            await asyncio.sleep(0)  # (the transport flushes what the socket takes)
        assert written > 0 and protocol.flow.write_paused
    await no_streams_left(hub)
    assert not protocol.write_now(b": after\n\n")
