"""Shared types of the API's bodies: the base models, constrained strings, times, examples."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    WithJsonSchema,
)

from notifyhub.domain.notification import CONTROL, CONTROL_BUT_WHITESPACE, to_rfc3339

MAX_DATA_BYTES = 16 * 1024
MAX_EPOCH_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
MAX_EPOCH_DIGITS = 14
MAX_JSON_NUMBER = 2**63
TOKEN = r"^[A-Za-z0-9._:-]+$"
NO_CONTROL = r"^[^\x00-\x1F\x7F-\x9F]*$"
"""No control characters (Unicode Cc), so the schema says what `single_line` enforces."""
NO_CONTROL_BUT_WHITESPACE = r"^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F]*$"


def _clean(value: str, forbidden: re.Pattern[str]) -> str:
    if forbidden.search(value) is not None:
        raise ValueError("must not contain control characters, NUL bytes or lone surrogates")
    return value


def single_line(value: str) -> str:
    """Refuse control characters (line breaks too), NUL bytes and lone surrogates."""
    return _clean(value, CONTROL)


def multi_line(value: str) -> str:
    """Refuse what `single_line` refuses, but allow CR, LF and TAB."""
    return _clean(value, CONTROL_BUT_WHITESPACE)


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_NUMBER_LIKE = re.compile(r"^\s*[-+]?[\d_.]+(?:[eE][-+]?\d+)?\s*$|^\s*(?:nan|inf)", re.I)
"""What float() would read as a number (Unicode digits too): not a time string."""


def _to_time(value: Any) -> Any:
    """Times are RFC 3339 strings or epoch milliseconds; naive times are UTC."""
    if isinstance(value, str):
        # A number in a string (query parameters are strings) is epoch ms too, as the
        # schema says: ASCII digits, or a JSON number (a query's `number`); anything else
        # is RFC 3339 or refused (not float()'s "1_000", "+5", " 12" or full-width digits).
        if value.isascii() and value.isdigit():
            value = int(value)
        elif _JSON_NUMBER.fullmatch(value):
            value = float(value)
        elif _NUMBER_LIKE.match(value):
            raise ValueError("epoch milliseconds must be ASCII digits or a JSON number")
        else:
            return value  # RFC 3339, parsed by pydantic
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not 0 <= value <= MAX_EPOCH_MS:  # also keeps fromtimestamp from overflowing
            raise ValueError(f"epoch milliseconds must be within 0..{MAX_EPOCH_MS}")
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    return value


def _aware(value: datetime) -> datetime:
    """Naive times are UTC. A time must be one in UTC too: an offset can carry 0001-01-01
    before year 1 and 9999-12-31 past 9999, which Python cannot hold (every later step
    that turns it into UTC failed, a 500)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("must be within the years 1 to 9999 in UTC") from exc
    return value


def _jsonb_safe(value: JsonValue) -> bool:
    """Whether PostgreSQL's jsonb keeps `value` as is (nesting is bounded by the limits)."""
    if isinstance(value, dict):
        return all("\x00" not in k and _jsonb_safe(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_jsonb_safe(v) for v in value)
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, float):  # strictly: orjson reads -2**63 - 1 as the float -2**63
        return -MAX_JSON_NUMBER < value < MAX_JSON_NUMBER
    if isinstance(value, int) and not isinstance(value, bool):
        return -MAX_JSON_NUMBER <= value < MAX_JSON_NUMBER
    return True


def ensure_storable(value: JsonValue) -> None:
    """Refuse (ValueError) what PostgreSQL's jsonb would not keep as is."""
    # Scheduled and delayed bodies live in jsonb, which refuses \u0000 and writes 1e30
    # back as 1000...0, an integer orjson cannot encode: neither could be sent later.
    if not _jsonb_safe(value):
        raise ValueError(
            "must not contain NUL characters, nor integers outside"
            f" {-MAX_JSON_NUMBER}..{MAX_JSON_NUMBER - 1} (64 bits) or numbers as big"
        )


def _small_json(value: dict[str, JsonValue]) -> dict[str, JsonValue]:
    ensure_storable(value)
    try:
        size = len(orjson.dumps(value))
    except orjson.JSONEncodeError as exc:
        raise ValueError("must be JSON without lone surrogates") from exc
    if size > MAX_DATA_BYTES:
        raise ValueError(f"must serialize to at most {MAX_DATA_BYTES} bytes (got {size})")
    return value


SmallJson = Annotated[dict[str, JsonValue], AfterValidator(_small_json)]
"""Any JSON object, up to 16 KiB serialized."""


Line = Annotated[str, Field(pattern=NO_CONTROL), AfterValidator(single_line)]
Tenant = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
UserId = Annotated[Line, Field(min_length=1, max_length=200)]
Name = Annotated[str, Field(min_length=1, max_length=100, pattern=TOKEN)]
Category = Annotated[str, Field(min_length=1, max_length=64, pattern=TOKEN)]
Tag = Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z0-9][a-z0-9_-]*$")]
MAX_TAGS = 10


def _distinct(what: str) -> AfterValidator:
    """A list's check that no item comes twice (`what` names the items in the error)."""

    def check(items: list[str]) -> list[str]:
        if len(set(items)) != len(items):
            raise ValueError(f"{what} must be distinct")
        return items

    return AfterValidator(check)


Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS), _distinct("tags")]
Categories = Annotated[list[Category], Field(max_length=MAX_TAGS), _distinct("categories")]
ChannelName = Literal["inbox", "email", "push"]
Channels = Annotated[
    list[ChannelName],
    Field(max_length=3, json_schema_extra={"uniqueItems": True}),
    _distinct("channels"),
]
"""Where a notification reaches its users: every copy is in the inbox (`inbox` may be
named or left out); `email` and `push` (Web Push) are the channels beyond it."""


def inbox_only() -> list[ChannelName]:
    """The default `channels`: the inbox alone."""
    return ["inbox"]


NotificationId = Annotated[
    str, Field(min_length=26, max_length=26, pattern=r"^[0-9A-HJKMNP-TV-Z]+$")
]
TIME_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "string", "pattern": f"^[0-9]{{1,{MAX_EPOCH_DIGITS}}}$"},
        {"type": "number", "minimum": 0, "maximum": MAX_EPOCH_MS},
    ]
}
"""RFC 3339, or epoch milliseconds as a number or a string of digits."""
Time = Annotated[
    datetime, BeforeValidator(_to_time), AfterValidator(_aware), WithJsonSchema(TIME_SCHEMA)
]


ULID_EXAMPLE = "01JD3Q4M6T9W2Z8K5N7R1C0B3X"
"""The id every example uses: a ULID as the hub issues them."""
TIME_EXAMPLE = "2026-11-20T09:15:02.113Z"


DATE_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
Timestamp = Annotated[str, WithJsonSchema(DATE_TIME)]
"""A time as responses write it: RFC 3339, UTC, millisecond precision, with a `Z`."""
Instant = Annotated[
    datetime, PlainSerializer(to_rfc3339, return_type=str), WithJsonSchema(DATE_TIME)
]
"""A response's time held as a datetime, written as `Timestamp` (`to_rfc3339`): a bare
`datetime` field would write microseconds, or none at all when they are 0
(tests/unit/test_response_times.py walks every response for one)."""


def examples(*values: dict[str, Any]) -> ConfigDict:
    """A model's examples in its JSON schema (Swagger shows the first, never a value it
    would derive from a pattern)."""
    return ConfigDict(json_schema_extra={"examples": list(values)})


class Documented(BaseModel):
    """Fields are described by their attribute docstrings."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class Strict(Documented):
    """A request body: unknown fields are refused (422); its numbers and booleans are
    `StrictInt`, `StrictFloat` and `StrictBool` (a JSON string or a number in their place
    is a 422, never converted: tests/unit/test_strict_bodies.py walks every body)."""

    model_config = ConfigDict(extra="forbid")
