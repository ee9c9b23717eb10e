"""Request limits as pure ASGI middleware: body size (chunked too), JSON depth, UTF-8.

They run before any parsing, so a 10 MB body, a body without Content-Length or JSON
nested 100k deep is refused before it can cost anything.
"""

from __future__ import annotations

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PROBLEM = b"application/problem+json"
_OPEN, _CLOSE, _QUOTE, _BACKSLASH = frozenset(b"[{"), frozenset(b"]}"), 0x22, 0x5C


def json_depth(body: bytes) -> int:
    """Deepest nesting of `[`/`{` outside strings, in one pass over the bytes."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif byte in _CLOSE:
            depth -= 1
    return deepest


class TooLargeBody(Exception):
    pass


class RequestLimits:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int, max_json_depth: int = 32) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            await _problem(
                send,
                413,
                "Content too large",
                f"request bodies are limited to {self.max_body_bytes} bytes",
            )
            return
        try:
            body, trailing = await self._read(receive)
        except TooLargeBody:
            await _problem(
                send,
                413,
                "Content too large",
                f"request bodies are limited to {self.max_body_bytes} bytes",
            )
            return
        problem = self._check(body, headers.get(b"content-type", b""))
        if problem is not None:
            await _problem(send, 422, "Unprocessable content", problem)
            return
        await self.app(scope, _replay(body, trailing, receive), send)

    async def _read(self, receive: Receive) -> tuple[bytes, list[Message]]:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks), [message]
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise TooLargeBody
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), []

    def _check(self, body: bytes, content_type: bytes) -> str | None:
        if not body or b"json" not in content_type.lower():
            return None
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return "request body is not valid UTF-8"
        if json_depth(body) > self.max_json_depth:
            return f"JSON nested deeper than {self.max_json_depth} levels"
        return None


def _replay(body: bytes, trailing: list[Message], receive: Receive) -> Receive:
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}, *trailing]

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def _problem(send: Send, status: int, title: str, detail: str) -> None:
    body = orjson.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
