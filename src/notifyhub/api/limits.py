"""Request limits as pure ASGI middleware: body size (chunked too), JSON depth, UTF-8 (of
the body and of the path)."""

from __future__ import annotations

import asyncio
import re
from array import array
from collections.abc import Awaitable
from itertools import accumulate
from urllib.parse import unquote_to_bytes

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notifyhub.api.errors import problem_response
from notifyhub.errors import InvalidInput, TooLarge

_BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
"""A JSON string, escapes included; an unterminated one runs to the end of the body."""
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""Opening brackets step +1, closing ones -1 (as signed bytes)."""
_CHUNK = 64 * 1024
DRAIN_BYTES = 64 * 1024 * 1024
"""How much of a refused body is read and dropped before the 413 is sent: a client still
sending reads the answer then, where closing on unread bytes would reset the connection
under it. A body declared (or grown) larger is answered at once."""
DRAIN_S = 5.0
"""How long draining may take (a client trickling its body gets the answer after it)."""


def json_depth(body: bytes, *, stop_above: int | None = None) -> int:
    """Deepest `[`/`{` nesting outside strings, in one linear pass that never parses.

    Strings are skipped by a regular expression, the remaining brackets become +1/-1
    steps and a running sum finds the deepest point, all in C (several times faster than
    a byte-by-byte loop: docs/scaling.md, "Design notes"). With `stop_above` the scan
    ends at the first chunk that goes deeper (deep nesting is the attack case).
    """
    steps = array("b", _STRING.sub(b"", body).translate(_STEPS, _NOT_BRACKETS))
    depth = deepest = 0
    for start in range(0, len(steps), _CHUNK):
        sums = list(accumulate(steps[start : start + _CHUNK], initial=depth))
        depth, deepest = sums[-1], max(deepest, max(sums))
        if stop_above is not None and deepest > stop_above:
            break
    return deepest


def _may_nest(body: bytes, depth: int) -> bool:
    """Whether `body` has enough opening brackets to nest deeper than `depth` (counted in
    C, strings included): a publish has a handful, and skips the scan."""
    return body.count(b"{") + body.count(b"[") > depth


def _is_json(content_type: str | None) -> bool:
    """As FastAPI decides: no content type, `application/json` or `application/*+json`."""
    if not content_type:
        return True
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _is_text(content_type: str | None) -> bool:
    return _is_json(content_type) or (content_type or "").lower().startswith("text/")


def _utf8_path(scope: Scope) -> bool:
    """Whether the request's path, percent-escapes decoded, is UTF-8. The server decodes
    it with U+FFFD for what is not (so only a path holding one is checked): two byte
    strings would then name one user."""
    raw = scope.get("raw_path")
    if not raw:
        return True
    try:
        unquote_to_bytes(raw).decode()
    except UnicodeDecodeError:
        return False
    return True


class _Disconnected(Exception):
    """The client went away before sending its whole body."""


class _TooLarge(Exception):
    """The body grew past the cap while it was being read."""


class RequestLimits:
    """Refuse bodies that are too large, nested too deep or not UTF-8, before parsing.

    A declared `Content-Length` over the cap is refused without buffering a byte; other
    bodies (chunked too) are read counting bytes and refused as soon as they pass the
    cap. Either way the rest is read and dropped (up to DRAIN_BYTES) before the 413, so
    the client reads it instead of a reset. Textual bodies must be UTF-8; JSON bodies
    (FastAPI parses a body without a content type as JSON too) may nest at most
    `max_json_depth` deep, checked by a scan that cannot recurse. The body is then
    replayed to the app. Requests without a body (GET, HEAD, OPTIONS without length
    headers, so also every event stream) pass straight through, unbuffered.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, max_json_depth: int = 32) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not `async`: requests passed through are handed on, so no frame of this
        # middleware stays alive for the hours an event stream lasts.
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        if "\ufffd" in scope["path"] and not _utf8_path(scope):
            problem = "path: not UTF-8 (a percent-escape decodes to bytes UTF-8 does not allow)"
            return problem_response(InvalidInput.status, InvalidInput.title, problem)(
                scope, receive, send
            )
        headers = Headers(scope=scope)
        if scope["method"] in _BODYLESS_METHODS and not _declares_body(headers):
            return self.app(scope, receive, send)
        return self._limited(scope, receive, send, headers)

    async def _limited(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            if int(length) <= DRAIN_BYTES:
                await _drain(receive, int(length))
            await self._too_large(scope, receive, send)
            return
        try:
            body = await self._read(receive)
        except _TooLarge:
            await _drain(receive, DRAIN_BYTES - self.max_body_bytes)
            await self._too_large(scope, receive, send)
            return
        except _Disconnected:
            return  # nobody is left to answer
        problem = self._problem(body, headers.get("content-type"))
        if problem is not None:
            response = problem_response(InvalidInput.status, InvalidInput.title, problem)
            await response(scope, receive, send)
            return
        await self.app(scope, replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _problem(self, body: bytes, content_type: str | None) -> str | None:
        """Why this body is refused (422), or None."""
        if not body or not _is_text(content_type):
            return None
        if not body.isascii():  # (ASCII is UTF-8: most bodies need no decoding)
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                return "request body is not valid UTF-8"
        too_deep = self.max_json_depth
        if (
            _is_json(content_type)
            and _may_nest(body, too_deep)
            and json_depth(body, stop_above=too_deep) > too_deep
        ):
            return f"JSON nested deeper than {too_deep} levels"
        return None

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"request bodies are limited to {self.max_body_bytes} bytes"
        # The rest of the body is never read, so the connection cannot be reused.
        response = problem_response(
            TooLarge.status, TooLarge.title, detail, headers={"Connection": "close"}
        )
        await response(scope, receive, send)


async def _drain(receive: Receive, limit: int) -> None:
    """Read and drop the rest of a refused body: at most `limit` bytes, for at most
    DRAIN_S seconds, until the client's last chunk or its leaving."""
    drained = 0
    try:
        async with asyncio.timeout(DRAIN_S):
            while drained <= limit:
                message = await receive()
                if message["type"] == "http.disconnect" or not message.get("more_body"):
                    return
                drained += len(message.get("body", b""))
    except TimeoutError:
        return


def _declares_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    return (length is not None and length != "0") or "transfer-encoding" in headers


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that yields the buffered body once, then the client's later messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
