"""Bodies of reliable webhook deliveries: definitions, deliveries, their attempts and lists.

The response models describe the JSON `services/deliveries.py` builds today (dicts, for
now: the deliveries work turns them into typed results)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

import httpx
import orjson
from pydantic import (
    AfterValidator,
    Field,
    JsonValue,
    StrictBool,
    StrictFloat,
    StrictInt,
    model_validator,
)

from notifyhub.api.schemas.common import (
    TIME_EXAMPLE,
    ULID_EXAMPLE,
    Documented,
    Line,
    Name,
    Strict,
    Tenant,
    Timestamp,
    ensure_storable,
    examples,
)
from notifyhub.domain.delivery import AlertTrigger, DeliveryStatus, parse_intervals
from notifyhub.services.email_target import is_address
from notifyhub.services.locales import LOCALE, MAX_TRANSLATIONS

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
    ensure_storable(value)  # else the INSERT fails (NUL), or the send (a number jsonb rewrote)
    try:
        size = len(orjson.dumps(value))
    except orjson.JSONEncodeError as exc:
        raise ValueError("must be JSON without lone surrogates") from exc
    if size > MAX_PAYLOAD_BYTES:
        raise ValueError(f"must serialize to at most {MAX_PAYLOAD_BYTES} bytes (got {size})")
    return value


HttpUrl = Annotated[str, Field(max_length=2000), AfterValidator(_http_url)]


def _one_address(value: str) -> str:
    if not is_address(value):
        raise ValueError(
            f"{value!r} is not one e-mail address as mail servers read it (no , ; < > ( ) "
            "or quotes outside an address)"
        )
    return value


Email = Annotated[
    str, Field(max_length=254, pattern=r"^[^@\s]+@[^@\s]+$"), AfterValidator(_one_address)
]


_ALERT = {
    "trigger": "after_n",
    "after_n": 3,
    "emails": ["ops@wms.example"],
    "webhook_url": "https://alerts.wms.example/notifyhub",
}


class AlertIn(Strict):
    """Who hears of failing deliveries, and when."""

    model_config = examples(_ALERT)

    trigger: AlertTrigger = AlertTrigger.FINAL_FAILURE
    """When to alert: final_failure, every_failure, after_n failures, or never."""
    after_n: Annotated[StrictInt, Field(ge=1, le=10_000)] | None = None
    """With `after_n`: after how many failed attempts."""
    emails: Annotated[list[Email], Field(max_length=20)] = []
    """Addresses to email."""
    webhook_url: HttpUrl | None = None
    """A URL to POST the alert to."""

    @model_validator(mode="after")
    def _after_n(self) -> AlertIn:
        if self.trigger is AlertTrigger.AFTER_N and self.after_n is None:
            raise ValueError("trigger `after_n` needs `after_n`")
        return self


Template = Annotated[str, Field(min_length=1, max_length=20_000)]
_EMAIL = {
    "to": ["ops@wms.example"],
    "subject": "Order {{ order }} shipped",
    "text": "Order {{ order }} is on its way.",
    "html": "<p>Order <b>{{ order }}</b> is on its way.</p>",
}


class EmailTemplatesIn(Strict):
    """One locale's message: sandboxed templates over the delivery's payload."""

    subject: Annotated[Template, Field(max_length=1000)]
    """The subject (whitespace folded to single spaces)."""
    text: Template
    """The plain-text body, always sent."""
    html: Template | None = None
    """An HTML alternative, sent beside the text when given."""


class EmailTargetIn(EmailTemplatesIn):
    """An `email` definition's target: who gets it and what it says."""

    model_config = examples(_EMAIL)

    to: Annotated[list[Email], Field(max_length=50)] = []
    """Recipients; when empty, the delivery's payload names them (`to`: one or a list)."""
    locales: Annotated[
        dict[Annotated[str, Field(max_length=35, pattern=LOCALE)], EmailTemplatesIn],
        Field(max_length=MAX_TRANSLATIONS),
    ] = {}
    """Messages per locale, chosen by the payload's `locale` (`pt-BR`, then `pt`)."""


def _short_string(value: str) -> str:
    """AMQP's `shortstr`: at most 255 bytes, which UTF-8 reaches in fewer characters."""
    if len(value.encode()) > 255:
        raise ValueError(f"at most 255 bytes in UTF-8, not {len(value.encode())}")
    return value


class RabbitTargetIn(Strict):
    """A `rabbitmq` definition's target: where each delivery is published (the broker is
    the hub's `NOTIFYHUB_AMQP_URL`)."""

    model_config = examples({"exchange": "orders", "routing_key": "order.paid"})

    exchange: Annotated[str, Field(max_length=255, pattern=r"^[A-Za-z0-9_.:-]*$")]
    """The exchange (it must exist; the receiving system declares it); `""` is the
    default exchange, which routes by queue name."""
    routing_key: Annotated[Line, Field(max_length=255), AfterValidator(_short_string)] = ""
    """The routing key (at most 255 bytes in UTF-8, AMQP's short string)."""


class DefinitionIn(Strict):
    """Where and how deliveries of this definition are sent: a webhook (Standard
    Webhooks) or an e-mail."""

    model_config = examples(
        {
            "url": "https://erp.example/hooks/notifyhub",
            "timeout_s": 10.0,
            "retry_intervals": "5s,5m,1h,1d",
            "max_retries": 5,
            "alert": {"trigger": "final_failure", "emails": ["ops@wms.example"]},
            "need_confirm": False,
            "max_confirm_delay_s": 300,
        }
    )

    tenant: Tenant = "default"
    """The definition's tenant; may be given as `?tenant=` instead, like the other admin
    PUTs (both given must agree)."""
    kind: Literal["webhook", "email", "rabbitmq", "webpush"] = "webhook"
    """The target: `webhook` POSTs to `url`; `email` sends through the hub's SMTP
    settings as `email` says; `rabbitmq` publishes as `rabbitmq` says; `webpush` sends
    each delivery to the browser push subscription its payload names (no target
    fields: the endpoint is the subscription's)."""
    url: HttpUrl | None = None
    """The webhook receiver (kind `webhook` only): an absolute http(s) URL (private
    addresses are refused unless `NOTIFYHUB_DELIVERIES_ALLOW_PRIVATE_NETWORKS` is set)."""
    email: EmailTargetIn | None = None
    """The e-mail target (kind `email` only)."""
    rabbitmq: RabbitTargetIn | None = None
    """The RabbitMQ target (kind `rabbitmq` only)."""
    timeout_s: Annotated[StrictFloat, Field(gt=0, le=60)] = 10.0
    """How long one attempt may take."""
    retry_intervals: Annotated[
        str, Field(min_length=1, max_length=500), AfterValidator(_intervals)
    ] = "5s,5m,1h,1d"
    """Waits between attempts, comma-separated (`s`, `m`, `h`, `d`); the last repeats."""
    max_retries: Annotated[StrictInt, Field(ge=-1, le=10_000)] = 5
    """Retries after the first attempt; -1 retries forever."""
    alert: AlertIn = AlertIn()
    """Who hears of failures."""
    need_confirm: StrictBool = False
    """A 2xx is not enough: the delivery waits for `POST /v1/deliveries/{id}/confirm`."""
    max_confirm_delay_s: Annotated[StrictInt, Field(ge=1, le=7 * 86400)] = 300
    """With `need_confirm`: how long to wait for the confirmation before retrying."""
    rotate_secret: StrictBool = False
    """Start a rotation: a new secret; every attempt is signed with both until dropped."""
    drop_previous_secret: StrictBool = False
    """End a rotation: sign with the current secret only."""

    @model_validator(mode="after")
    def _target(self) -> DefinitionIn:
        fields = {"webhook": "url", "email": "email", "rabbitmq": "rabbitmq"}
        given = [f for f in fields.values() if getattr(self, f) is not None]
        if self.kind == "webpush":
            if given:
                raise ValueError("kind `webpush` takes no `url`, `email` or `rabbitmq`")
            return self
        wanted = fields[self.kind]
        if given != [wanted]:
            others = " or ".join(f"`{f}`" for f in fields.values() if f != wanted)
            raise ValueError(f"kind `{self.kind}` needs `{wanted}` (and no {others})")
        return self


class DeliveryIn(Strict):
    """A webhook to send, durably, through a definition."""

    model_config = examples(
        {
            "tenant": "default",
            "definition": "erp-orders",
            "payload": {"event": "order.shipped", "order": "SO-1042"},
            "description": "SO-1042 shipped",
        }
    )

    tenant: Tenant = "default"
    """Whose definition this is; the delivery belongs to the same tenant."""
    definition: Name
    """The delivery definition to send through (an unknown one is a 422)."""
    payload: Annotated[dict[str, JsonValue], AfterValidator(_payload)]
    """The JSON object POSTed to the receiver, up to 64 KiB serialized."""
    description: Annotated[Line, Field(max_length=1000)] | None = None
    """A note for people reading the delivery later."""


class DeliveryAccepted(Documented):
    """The delivery is committed; the first attempt follows."""

    model_config = examples({"id": ULID_EXAMPLE, "tenant": "default", "status": "pending"})

    id: str
    """The delivery's ULID, also the `webhook-id` the receiver sees."""
    tenant: str
    """Its tenant."""
    status: str
    """`pending`."""


class AlertOut(Documented):
    """A definition's alerting, as stored."""

    model_config = examples(_ALERT)

    trigger: AlertTrigger
    """When to alert."""
    after_n: int | None
    """With `after_n`: after how many failed attempts."""
    emails: list[str]
    """Addresses emailed."""
    webhook_url: str | None
    """The URL alerts are POSTed to."""


class EmailTemplatesOut(Documented):
    """One locale's message templates."""

    subject: str
    text: str
    html: str | None = None


class EmailTargetOut(EmailTemplatesOut):
    """An `email` definition's target as stored."""

    model_config = examples(_EMAIL)

    to: list[str] = []
    """Recipients (empty: the payload's `to`)."""
    locales: dict[str, EmailTemplatesOut] = {}
    """Messages per locale."""


class RabbitTargetOut(Documented):
    """A `rabbitmq` definition's target as stored."""

    model_config = examples({"exchange": "orders", "routing_key": "order.paid"})

    exchange: str
    routing_key: str = ""


class DefinitionOut(Documented):
    """A delivery definition as stored."""

    model_config = examples(
        {
            "tenant": "default",
            "name": "erp-orders",
            "kind": "webhook",
            "url": "https://erp.example/hooks/notifyhub",
            "email": None,
            "rabbitmq": None,
            "timeout_s": 10.0,
            "retry_intervals": "5s,5m,1h,1d",
            "max_retries": 5,
            "alert": {
                "trigger": "final_failure",
                "after_n": None,
                "emails": ["ops@wms.example"],
                "webhook_url": None,
            },
            "need_confirm": False,
            "max_confirm_delay_s": 300,
            "disabled": False,
            "rotating": False,
            "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        }
    )

    tenant: str
    """Its tenant."""
    name: str
    """Its name."""
    kind: str
    """`webhook`, `email`, `rabbitmq` or `webpush`."""
    url: str | None
    """The webhook receiver (None for other kinds)."""
    email: EmailTargetOut | None
    """The e-mail target (null unless kind `email`)."""
    rabbitmq: RabbitTargetOut | None
    """The RabbitMQ target (null unless kind `rabbitmq`)."""
    timeout_s: float
    """How long one attempt may take."""
    retry_intervals: str
    """Waits between attempts."""
    max_retries: int
    """Retries after the first attempt; -1: forever."""
    alert: AlertOut
    """Who hears of failures."""
    need_confirm: bool
    """Whether deliveries wait for a confirmation."""
    max_confirm_delay_s: int
    """How long a confirmation is waited for."""
    disabled: bool
    """Its receiver answered 410: new deliveries on it are refused."""
    rotating: bool
    """A rotation is under way: attempts are signed with both secrets."""
    secret: str | None = None
    """The signing secret: present on creation and rotation only, otherwise absent."""
    warnings: list[str] | None = None
    """On `PUT` only: notes about its URLs that were not refused (a host name that does
    not resolve yet is stored and checked again at every connection)."""


_DEFINITION: dict[str, object] = {
    "tenant": "default",
    "name": "erp-orders",
    "kind": "webhook",
    "url": "https://erp.example/hooks/notifyhub",
    "email": None,
    "rabbitmq": None,
    "timeout_s": 10.0,
    "retry_intervals": "5s,5m,1h,1d",
    "max_retries": 5,
    "alert": {"trigger": "final_failure", "after_n": None, "emails": [], "webhook_url": None},
    "need_confirm": False,
    "max_confirm_delay_s": 300,
    "disabled": False,
    "rotating": False,
}


class DefinitionPage(Documented):
    """A page of the tenant's delivery definitions, by name (never their secrets)."""

    model_config = examples({"definitions": [_DEFINITION], "next_cursor": "erp-orders"})

    definitions: list[DefinitionOut]
    """Definitions, by name, as `GET /v1/admin/delivery-definitions/{name}` shows each."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""


_ATTEMPT = {
    "attempt": 1,
    "at": TIME_EXAMPLE,
    "status_code": 503,
    "error": "HTTP 503",
    "duration_ms": 84.2,
}


class AttemptOut(Documented):
    """One attempt to send a delivery."""

    model_config = examples(_ATTEMPT)

    attempt: int
    """1 for the first, then 2, 3...."""
    at: Timestamp
    """When it started."""
    status_code: int | None
    """The receiver's HTTP status; null when none came."""
    error: str | None
    """Why it failed; null on success."""
    duration_ms: float
    """How long it took."""


class DeliveryOut(Documented):
    """A delivery and its attempts."""

    model_config = examples(
        {
            "id": ULID_EXAMPLE,
            "tenant": "default",
            "definition": "erp-orders",
            "status": "failed",
            "payload": {"event": "order.shipped", "order": "SO-1042"},
            "description": "SO-1042 shipped",
            "failures": 1,
            "created_at": TIME_EXAMPLE,
            "last_attempt_at": TIME_EXAMPLE,
            "next_attempt_at": "2026-11-20T09:15:07.197Z",
            "last_error": "HTTP 503",
            "finished_at": None,
            "attempts": [_ATTEMPT],
        }
    )

    id: str
    """The delivery's ULID (the `webhook-id`)."""
    tenant: str
    """Its tenant."""
    definition: str
    """The definition it is sent through."""
    status: DeliveryStatus
    """pending, sent, failed, final_failed or awaiting_confirm."""
    payload: dict[str, JsonValue]
    """The JSON object sent."""
    description: str | None
    """The note given at creation."""
    failures: int
    """Failed attempts so far."""
    created_at: Timestamp | None
    """When it was created."""
    last_attempt_at: Timestamp | None
    """When the last attempt started."""
    next_attempt_at: Timestamp | None
    """When the next attempt is due, while one may come (pending, failed, awaiting_confirm)."""
    last_error: str | None
    """Why the last attempt failed."""
    finished_at: Timestamp | None
    """When it was sent (or given up on)."""
    attempts: list[AttemptOut]
    """Every attempt, oldest first."""


_DELIVERY = {
    "id": ULID_EXAMPLE,
    "tenant": "default",
    "definition": "erp-orders",
    "status": "final_failed",
    "description": "SO-1042 shipped",
    "failures": 6,
    "created_at": TIME_EXAMPLE,
    "last_attempt_at": TIME_EXAMPLE,
    "next_attempt_at": None,
    "last_error": "HTTP 503",
    "finished_at": TIME_EXAMPLE,
}


class DeliverySummary(Documented):
    """A delivery without its payload and attempts (`GET /v1/deliveries/{id}` has them)."""

    model_config = examples(_DELIVERY)

    id: str
    """The delivery's ULID."""
    tenant: str
    """Its tenant."""
    definition: str
    """The definition it is sent through."""
    status: DeliveryStatus
    """pending, sent, failed, final_failed or awaiting_confirm."""
    description: str | None
    """The note given at creation."""
    failures: int
    """Failed attempts so far."""
    created_at: Timestamp | None
    """When it was created."""
    last_attempt_at: Timestamp | None
    """When it was last tried."""
    next_attempt_at: Timestamp | None
    """When it is tried next; null once finished."""
    last_error: str | None
    """What went wrong last."""
    finished_at: Timestamp | None
    """When it was sent (confirmed) or finally failed."""


class DeliveryPage(Documented):
    """A page of the tenant's deliveries, newest first, live and archived."""

    model_config = examples({"deliveries": [_DELIVERY], "next_cursor": ULID_EXAMPLE})

    deliveries: list[DeliverySummary]
    """Deliveries, newest first."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""
