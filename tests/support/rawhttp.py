"""HTTP on bare sockets, for what a polite client never does: stop reading a stream, or
send a request head past the hub's cap."""

from __future__ import annotations

import asyncio
import socket


def _address(base_url: str) -> tuple[str, int]:
    host, port = base_url.removeprefix("http://").split(":")
    return host, int(port)


async def stuck_stream(base_url: str, token: str, rcvbuf: int = 4096) -> socket.socket:
    """A stream on a bare socket with a tiny receive buffer (set before connecting) that
    is never read after the response head."""
    host, port = _address(base_url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (host, port))
    request = f"GET /v1/me/stream HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n"
    await loop.sock_sendall(sock, request.encode())
    head = await loop.sock_recv(sock, 1024)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def request_head(path: str, token: str, length: int | None = None) -> bytes:
    """A GET's head bearing `token` (`Connection: close`), padded by one more header to
    `length` bytes if given."""
    start = b"GET %b HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer %b\r\n" % (
        path.encode(),
        token.encode(),
    )
    if length is None:
        return start + b"\r\n"
    pad = length - len(start) - len(b"X-Pad: \r\n\r\n")
    head = start + b"X-Pad: " + b"a" * pad + b"\r\n\r\n"
    assert len(head) == length
    return head


async def exchange(base_url: str, head: bytes, timeout_s: float = 10.0) -> bytes:
    """Send a whole request head, then read until the server closes: what it answered.
    A reset on the way raises (ConnectionResetError, BrokenPipeError)."""
    loop = asyncio.get_running_loop()
    with socket.socket() as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, _address(base_url))
        received = b""
        async with asyncio.timeout(timeout_s):
            await loop.sock_sendall(sock, head)
            while chunk := await loop.sock_recv(sock, 65536):
                received += chunk
        return received
