"""Request and response bodies of the reliable-deliveries API (Design 2).

The response models describe the JSON `services/deliveries.py` builds today (dicts, for
now: the deliveries work turns them into typed results)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

import httpx
import orjson
from pydantic import AfterValidator, BaseModel, Field, JsonValue, model_validator

from notifyhub.api.schemas import Line, Name, Strict, Tenant, Timestamp, _storable
from notifyhub.domain.delivery import AlertTrigger, DeliveryStatus, parse_intervals

MAX_PAYLOAD_BYTES = 64 * 1024


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http:// or https:// URL")
    if parts.username or parts.password:
        raise ValueError("must not carry credentials")
    try:
        httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise ValueError(f"is not a valid URL: {exc}") from exc
    return value


def _intervals(value: str) -> str:
    parse_intervals(value)
    return value.replace(" ", "")


def _payload(value: dict[str, JsonValue]) -> dict[str, JsonValue]:
    _storable(value)  # else the INSERT fails (NUL), or the send (a number jsonb rewrote)
    try:
        size = len(orjson.dumps(value))
    except orjson.JSONEncodeError as exc:
        raise ValueError("must be JSON without lone surrogates") from exc
    if size > MAX_PAYLOAD_BYTES:
        raise ValueError(f"must serialize to at most {MAX_PAYLOAD_BYTES} bytes (got {size})")
    return value


HttpUrl = Annotated[str, Field(max_length=2000), AfterValidator(_http_url)]
Email = Annotated[str, Field(max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")]


class AlertIn(Strict):
    trigger: AlertTrigger = AlertTrigger.FINAL_FAILURE
    after_n: Annotated[int, Field(ge=1, le=10_000)] | None = None
    emails: Annotated[list[Email], Field(max_length=20)] = []
    webhook_url: HttpUrl | None = None

    @model_validator(mode="after")
    def _after_n(self) -> AlertIn:
        if self.trigger is AlertTrigger.AFTER_N and self.after_n is None:
            raise ValueError("trigger `after_n` needs `after_n`")
        return self


class DefinitionIn(Strict):
    tenant: Tenant = "default"
    """The definition's tenant; may be given as `?tenant=` instead, like the other admin
    PUTs (both given must agree)."""
    url: HttpUrl
    timeout_s: Annotated[float, Field(gt=0, le=60)] = 10.0
    retry_intervals: Annotated[
        str, Field(min_length=1, max_length=500), AfterValidator(_intervals)
    ] = "5s,5m,1h,1d"
    max_retries: Annotated[int, Field(ge=-1, le=10_000)] = 5
    alert: AlertIn = AlertIn()
    need_confirm: bool = False
    max_confirm_delay_s: Annotated[int, Field(ge=1, le=7 * 86400)] = 300
    rotate_secret: bool = False
    """Start a rotation: a new secret; every attempt is signed with both until dropped."""
    drop_previous_secret: bool = False
    """End a rotation: sign with the current secret only."""


class DeliveryIn(Strict):
    tenant: Tenant = "default"
    """Whose definition this is; the delivery belongs to the same tenant."""
    definition: Name
    payload: Annotated[dict[str, JsonValue], AfterValidator(_payload)]
    description: Annotated[Line, Field(max_length=1000)] | None = None


class DeliveryAccepted(BaseModel):
    id: str
    tenant: str
    status: str


class AlertOut(BaseModel):
    trigger: AlertTrigger
    after_n: int | None
    emails: list[str]
    webhook_url: str | None


class DefinitionOut(BaseModel):
    tenant: str
    name: str
    url: str
    timeout_s: float
    retry_intervals: str
    max_retries: int
    alert: AlertOut
    need_confirm: bool
    max_confirm_delay_s: int
    disabled: bool
    """Its receiver answered 410: new deliveries on it are refused."""
    rotating: bool
    """A rotation is under way: attempts are signed with both secrets."""
    secret: str | None = None
    """The signing secret: present on creation and rotation only, otherwise absent."""
    warnings: list[str] | None = None
    """On `PUT` only: notes about its URLs that were not refused (a host name that does
    not resolve yet is stored and checked again at every connection)."""


class AttemptOut(BaseModel):
    attempt: int
    at: Timestamp
    status_code: int | None
    error: str | None
    duration_ms: float


class DeliveryOut(BaseModel):
    id: str
    tenant: str
    definition: str
    status: DeliveryStatus
    payload: dict[str, JsonValue]
    description: str | None
    failures: int
    created_at: Timestamp | None
    last_attempt_at: Timestamp | None
    next_attempt_at: Timestamp | None
    """When the next attempt is due, while one may come (pending, failed, awaiting_confirm)."""
    last_error: str | None
    finished_at: Timestamp | None
    attempts: list[AttemptOut]
