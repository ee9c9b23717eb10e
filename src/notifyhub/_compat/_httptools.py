"""uvicorn internals: the hub's HTTP protocol, a subclass of uvicorn's httptools protocol
(`uvicorn.protocols.http.httptools_impl.HttpToolsProtocol`), imported only by
`notifyhub._compat.uvicorn` once it has checked uvicorn's version.

It relies on that class's parser callbacks (`on_message_begin`, `on_headers_complete`,
`on_message_complete`, `on_response_complete`, `data_received`, `connection_made`,
`connection_lost`) and attributes (`cycle`, `flow`, `pipeline`, `headers`, `scope`,
`transport`, `loop`), on its cycle's (`chunked_encoding`, `response_complete`,
`disconnected`, `message_event`) and on its flow control's (`write_paused`,
`_is_writable_event`).

httptools keeps a request's head in memory however long it grows: an unauthenticated huge
header cost the hub its size before its 401. Here the bytes of a head are counted as they
arrive and the parser is fed at most `max_head_bytes` of it: a head that does not end
within them is answered 431 problem+json. The connection is then closed gracefully: the
answer, a FIN, and what the client still sends (the rest of its head) read and dropped
until it closes, for at most `linger_s` and `linger_bytes`. Closing at once, with the
client's bytes unread, made the kernel reset the connection, and a reset can destroy the
answer before the client reads it.

Most of the hub's connections are idle event streams, held for hours, so what each one
keeps matters (the bench's `idle streams` rows):
- uvicorn keeps three empty deques per connection (its queue of pipelined requests, and
  the waiters of two `asyncio.Event`s, `_compat/asyncio.py`). Here they are lists:
  browsers do not pipeline, and an event has at most one waiter.
- The protocol lets go of a request's headers once its scope holds them, and an open
  stream drops them from its scope (api/fastpath.py): a browser's (cookies and all) are
  often KiBs, read once.
- A stream learns its client left from this protocol (`on_close`, the stream's
  `Connection` in its scope, realtime/sse.py), called from `connection_lost`, instead
  of a task per stream awaiting ASGI's `http.disconnect` (the task, its coroutines, a
  future).

A broadcast's announcement is written to an idle stream's connection at once
(`write_now`), the same chunk uvicorn's `send` would write, so that 10k streams are not
10k task wake-ups. A stream bounds its connection's kernel send buffer
(`bound_send_buffer`): what a client that stops reading can hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from notifyhub._compat.asyncio import lighten


class _Pipeline(list[Any]):
    """uvicorn's queue of pipelined requests (it takes `appendleft` and `pop`)."""

    def appendleft(self, item: Any) -> None:
        self.insert(0, item)


class LeanHttpToolsProtocol(HttpToolsProtocol):
    """httptools, counting the bytes of each request head as they arrive, lean per
    connection, and a stream's `Connection` (realtime/sse.py). A subclass sets the class
    attributes below (`uvicorn.capped_protocol`)."""

    # Slots: past uvicorn's ~30 attributes, one more in the instance dict makes CPython
    # give every connection a dict of its own (1.5 KiB, tracemalloc).
    __slots__ = ("_dropping", "_head_bytes", "_lost", "_on_close")

    max_head_bytes: ClassVar[int]
    """Request line and headers together: a head that does not end within them is refused."""
    refusal: ClassVar[bytes]
    """The whole answer to a refused head (a 431)."""
    linger_s: ClassVar[float]
    linger_bytes: ClassVar[int]
    """After a refusal, how long and how much of what the client still sends is read and
    dropped before the connection closes."""
    connection_key: ClassVar[str]
    """The scope key under which a stream finds this protocol (its `Connection`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipeline = _Pipeline()  # type: ignore[assignment]
        self._head_bytes: int | None = 0
        """Bytes received since the current head began; None while reading a body."""
        self._on_close: Callable[[], None] | None = None
        """Called once when the connection closes during the current response."""
        self._lost = False
        self._dropping: int | None = None
        """Refused (431): the bytes of the client's still to drop before closing."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        lighten(self.flow._is_writable_event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        super().connection_lost(exc)
        callback, self._on_close = self._on_close, None
        if callback is not None:
            callback()

    def on_close(self, callback: Callable[[], None]) -> None:
        """Have `callback()` called once when the client's connection closes before the
        current response completes (at once if it already has)."""
        if self._lost:
            callback()
        else:
            self._on_close = callback

    def write_now(self, body: bytes) -> bool:
        """Write `body` as the next chunk of the current response, as uvicorn's `send`
        would, when that response is a chunked one under way and the client keeps up;
        False otherwise (the caller sends it through ASGI, which waits for the client).
        A request pipelined behind a stream makes the protocol's current request one that
        has not answered yet: False too."""
        cycle = self.cycle
        if (
            cycle is None
            or not cycle.chunked_encoding
            or cycle.response_complete
            or cycle.disconnected
            or self.flow.write_paused
            or self.transport.is_closing()
        ):
            return False
        self.transport.write(b"%x\r\n%b\r\n" % (len(body), body))
        return True

    def bound_send_buffer(self, size_bytes: int) -> None:
        """Give the connection a kernel send buffer of `size_bytes` (SO_SNDBUF) instead of
        the auto-tuned one; 0 leaves it. A connection its client has closed keeps what it
        has: uvloop's closed socket refuses with a ValueError, asyncio's with an OSError."""
        sock = self.transport.get_extra_info("socket")
        if size_bytes and sock is not None and not self.transport.is_closing():
            with contextlib.suppress(OSError, ValueError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size_bytes)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[self.connection_key] = self  # type: ignore[literal-required]

    def on_response_complete(self) -> None:
        self._on_close = None
        super().on_response_complete()

    def data_received(self, data: bytes) -> None:
        head = self._head_bytes
        if head is None or head + len(data) <= self.max_head_bytes:
            if head is not None:
                self._head_bytes = head + len(data)
            super().data_received(data)
        elif self._dropping is not None:
            self._drop(len(data))
        else:
            self._past_limit(data, self.max_head_bytes - head)

    def _past_limit(self, data: bytes, room: int) -> None:
        """`data` takes the head past the cap: the parser gets what fits. A head that ends
        within it is served (the rest is its body, or the next request); else 431."""
        self._head_bytes = self.max_head_bytes
        if room > 0:
            super().data_received(data[:room])  # may complete the head (`on_headers_complete`)
        if self.transport.is_closing():
            return  # the parser refused the request (400)
        if self._head_bytes != self.max_head_bytes:
            self.data_received(data[room:])
        else:
            self._refuse()

    def _refuse(self) -> None:
        """Answer 431 and close gracefully (the module's docstring says why); just close
        when the head was pipelined behind a response still under way (a stream): an
        answer there would land inside that response."""
        self._dropping = self.linger_bytes
        transport, cycle = self.transport, self.cycle
        if cycle is not None and not cycle.response_complete:
            transport.close()
            return
        transport.write(self.refusal)
        if transport.can_write_eof():
            transport.write_eof()  # the client reads the answer, then its end of file
        self.loop.call_later(self.linger_s, transport.close)

    def _drop(self, received: int) -> None:
        """Drop what a refused client still sends; close once it has sent too much."""
        self._dropping = dropping = (self._dropping or 0) - received
        if dropping < 0:
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        cycle = self.cycle
        super().on_headers_complete()
        if self.cycle is not cycle:  # a request to answer (not a WebSocket upgrade)
            lighten(self.cycle.message_event)
            # The request's headers are in its scope; here they would outlive a stream's
            # reading them by hours (uvicorn reads them again only for an upgrade).
            self.headers = []

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_bytes = 0
