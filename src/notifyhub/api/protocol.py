"""The hub's HTTP protocol for uvicorn: capped request heads, lean connections.

A request line and headers together are capped at `MAX_HEAD_BYTES`: a head that does not
end within them is answered 431 problem+json (`REFUSAL`) and the connection closed
gracefully. The protocol itself, a subclass of uvicorn's httptools one, is in
`_compat/_httptools.py` (what it keeps per idle stream, and why); outside the uvicorn
versions it is tested with the hub serves with uvicorn's h11 (`_compat/uvicorn.py`), whose
own cap (`h11_max_incomplete_event_size`, set to the same value) answers a plain 400.
"""

from __future__ import annotations

from typing import Any

import orjson

from notifyhub._compat.uvicorn import capped_protocol
from notifyhub.realtime.sse import CONNECTION

MAX_HEAD_BYTES = 64 * 1024
"""Request line and headers together (nginx allows 32 KiB by default)."""
LINGER_S = 2.0
LINGER_BYTES = 1024 * 1024
"""After a 431, how long and how much of what the client still sends is read and dropped
before the connection closes (a client sending more than this gets a reset)."""


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


HubHttpProtocol = capped_protocol(
    max_head_bytes=MAX_HEAD_BYTES,
    refusal=REFUSAL,
    linger_s=LINGER_S,
    linger_bytes=LINGER_BYTES,
    connection_key=CONNECTION,
)
"""The hub's HTTP protocol for uvicorn (`_compat/uvicorn.py`): httptools, capped and lean;
uvicorn's h11 outside the uvicorn versions it is tested with."""


def head_limits() -> dict[str, Any]:
    """The `uvicorn.Config` options that cap request heads (every hub server uses them)."""
    return {"http": HubHttpProtocol, "h11_max_incomplete_event_size": MAX_HEAD_BYTES}
