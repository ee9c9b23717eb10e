"""Bodies of Web Push: the hub's VAPID public key and users' push subscriptions."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StrictFloat, StrictInt

from notifyhub.api.schemas.common import (
    MAX_EPOCH_MS,
    TIME_EXAMPLE,
    ULID_EXAMPLE,
    Documented,
    Instant,
    Line,
    Strict,
    examples,
)
from notifyhub.services.vapid import from_b64url, is_p256_point

B64URL = r"^[A-Za-z0-9_-]+={0,2}$"
P256DH_BYTES = 65
AUTH_BYTES = 16
MAX_ENDPOINT = 2048
_P256DH_EXAMPLE = (
    "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM"
)
_AUTH_EXAMPLE = "tBHItJI5svbpez7KI4CCXg"
_ENDPOINT_EXAMPLE = "https://fcm.googleapis.com/fcm/send/dK9Q3xV0p8E:APA91bH"


def _decoded_length(size: int, what: str) -> AfterValidator:
    def check(value: str) -> str:
        try:
            raw = from_b64url(value)
        except ValueError as exc:
            raise ValueError(f"{what} must be base64url") from exc
        if len(raw) != size:
            raise ValueError(f"{what} must decode to {size} bytes (got {len(raw)})")
        if what == "p256dh" and not is_p256_point(raw):
            raise ValueError("p256dh must be an uncompressed point on P-256")
        return value.rstrip("=")

    return AfterValidator(check)


class PushKeyOut(Documented):
    """What `pushManager.subscribe({applicationServerKey})` needs."""

    model_config = examples({"public_key": _P256DH_EXAMPLE})

    public_key: str
    """The hub's VAPID public key: base64url of the uncompressed P-256 point (65 bytes).
    Browsers take it as `applicationServerKey` (decoded to a Uint8Array)."""


class PushKeysIn(Strict):
    """The browser's keys of the subscription."""

    p256dh: Annotated[
        str,
        Field(min_length=86, max_length=88, pattern=B64URL),
        _decoded_length(P256DH_BYTES, "p256dh"),
    ]
    """Its P-256 public key, base64url (65 bytes: an uncompressed point)."""
    auth: Annotated[
        str,
        Field(min_length=22, max_length=24, pattern=B64URL),
        _decoded_length(AUTH_BYTES, "auth"),
    ]
    """Its authentication secret, base64url (16 bytes)."""


class PushSubscriptionIn(Strict):
    """A browser's `PushSubscription.toJSON()`, as it is."""

    model_config = examples(
        {
            "endpoint": _ENDPOINT_EXAMPLE,
            "expirationTime": None,
            "keys": {"p256dh": _P256DH_EXAMPLE, "auth": _AUTH_EXAMPLE},
        }
    )

    endpoint: Annotated[Line, Field(min_length=9, max_length=MAX_ENDPOINT, pattern=r"^[!-~]+$")]
    """The push service's URL for this browser, in ASCII as browsers give it: `https://`
    (`http://` only for a local address the deliveries' SSRF settings allow)."""
    expirationTime: Annotated[StrictInt | StrictFloat, Field(ge=0, le=MAX_EPOCH_MS)] | None = None
    """When the push service ends the subscription, epoch milliseconds (null: never said)."""
    keys: PushKeysIn
    """The browser's keys: what each push is encrypted for (RFC 8291)."""


class PushSubscriptionOut(Documented):
    """One of the user's push subscriptions."""

    model_config = examples(
        {
            "id": ULID_EXAMPLE,
            "endpoint": _ENDPOINT_EXAMPLE,
            "created_at": TIME_EXAMPLE,
            "expiration_time": None,
            "user_agent": "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        }
    )

    id: str
    """Its id (`DELETE /v1/me/push-subscriptions/{id}`)."""
    endpoint: str
    """The push service's URL for the browser."""
    created_at: Instant
    """When it was first registered."""
    expiration_time: Instant | None = None
    """When the push service ends it (null: never said)."""
    user_agent: str | None = None
    """The `User-Agent` of the request that registered it last (up to 300 characters)."""


class PushSubscriptionList(Documented):
    """The user's push subscriptions, oldest first (at most 10)."""

    model_config = examples(
        {
            "subscriptions": [
                {"id": ULID_EXAMPLE, "endpoint": _ENDPOINT_EXAMPLE, "created_at": TIME_EXAMPLE}
            ]
        }
    )

    subscriptions: list[PushSubscriptionOut]
