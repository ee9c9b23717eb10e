"""uvicorn internals: the hub's HTTP protocol subclasses uvicorn's httptools protocol
(`_compat/_httptools.py` names what it relies on), tested with uvicorn 0.30 and 0.54 (the
compat job's ends).

Outside those versions, or without httptools, the hub serves with uvicorn's h11 protocol
(`PLAIN`), whose own cap on request heads answers a plain 400 instead of a 431: streams
work as under any ASGI server (realtime/sse.py), with a task per stream awaiting
`http.disconnect` and every event sent through ASGI, so an idle stream costs more memory.
"""

from __future__ import annotations

import asyncio

from notifyhub._compat import in_range, installed, plain

TESTED = ">=0.30,<0.55"
"""The uvicorn versions the hub's own protocol is tested with (pyproject.toml's range)."""
PLAIN = "h11"
"""The uvicorn protocol the hub serves with when its own is off."""


def _select() -> type[asyncio.Protocol] | None:
    found = installed("uvicorn")
    if not in_range(found, TESTED):
        plain("uvicorn", f"version {found} is outside the tested {TESTED}")
        return None
    try:
        from notifyhub._compat._httptools import LeanHttpToolsProtocol
    except (ImportError, AttributeError) as exc:
        plain("uvicorn", f"its httptools protocol is not there ({exc})")
        return None
    return LeanHttpToolsProtocol


_LEAN = _select()


def capped_protocol(
    *,
    max_head_bytes: int,
    refusal: bytes,
    linger_s: float,
    linger_bytes: int,
    connection_key: str,
) -> type[asyncio.Protocol] | str:
    """The protocol class for `uvicorn.Config(http=...)`: the hub's own (its docstring,
    `_compat/_httptools.py`, says what the arguments do), or `PLAIN` outside the tested
    versions."""
    if _LEAN is None:
        return PLAIN
    attributes = {
        "__slots__": (),
        "__module__": __name__,
        "max_head_bytes": max_head_bytes,
        "refusal": refusal,
        "linger_s": linger_s,
        "linger_bytes": linger_bytes,
        "connection_key": connection_key,
    }
    return type("HubHttpProtocol", (_LEAN,), attributes)
