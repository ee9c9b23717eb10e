"""uvicorn's HTTP protocols, refusing a request head past a cap before buffering it.

uvicorn's default parser (httptools) keeps a request's head in memory however long it
grows: an unauthenticated huge header cost the hub its size before its 401. Here the bytes
of a head are counted as they arrive and a head past `MAX_HEAD_BYTES` is answered 431
and the connection closed, after at most one more read (256 KiB). h11, uvicorn's other
parser, has the cap built in (`h11_max_incomplete_event_size`), set to the same value.
"""

from __future__ import annotations

from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024
"""Request line and headers together (nginx allows 32 KiB by default)."""


def _refusal() -> bytes:
    body = orjson.dumps(
        {
            "type": "about:blank",
            "title": "Request header fields too large",
            "status": 431,
            "detail": f"request line and headers are limited to {MAX_HEAD_BYTES} bytes",
        }
    )
    head = (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
        b"content-type: application/problem+json\r\n"
        b"connection: close\r\n"
        b"content-length: %d\r\n\r\n" % len(body)
    )
    return head + body


REFUSAL = _refusal()


class CappedHttpToolsProtocol(HttpToolsProtocol):
    """httptools, counting the bytes of each request head as they arrive."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes: int | None = 0
        """Bytes received since the current head began; None while reading a body."""

    def data_received(self, data: bytes) -> None:
        if self._head_bytes is not None:
            self._head_bytes += len(data)
        super().data_received(data)  # may complete the head (`on_headers_complete`)
        if self._head_bytes is not None and self._head_bytes > MAX_HEAD_BYTES:
            self._head_bytes = None
            if not self.transport.is_closing():
                self.transport.write(REFUSAL)
                self.transport.close()

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_bytes = 0


def head_limits() -> dict[str, Any]:
    """The `uvicorn.Config` options that cap request heads (every hub server uses them)."""
    return {"http": CappedHttpToolsProtocol, "h11_max_incomplete_event_size": MAX_HEAD_BYTES}
