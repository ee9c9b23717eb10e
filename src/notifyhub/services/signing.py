"""Standard Webhooks v1 signatures: HMAC-SHA256 over `{id}.{timestamp}.{body}`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence

PREFIX = "whsec_"
SECRET_BYTES = 24
TOLERANCE_S = 300


def new_secret() -> str:
    """A fresh `whsec_` secret: 24 random bytes, base64."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    raw = secret.removeprefix(PREFIX)
    return base64.b64decode(raw)


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,<base64>` signature."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secrets_: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers; one signature per secret (rotation sends both)."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(s, msg_id, timestamp, body) for s in secrets_),
    }


def verify(secret: str, found: dict[str, str], body: bytes, now_s: int) -> bool:
    """True when any `v1` signature in `found` matches and the timestamp is fresh."""
    try:
        timestamp = int(found["webhook-timestamp"])
        expected = sign(secret, found["webhook-id"], timestamp, body)
    except (KeyError, ValueError):
        return False
    if abs(now_s - timestamp) > TOLERANCE_S:
        return False
    return any(
        hmac.compare_digest(expected, candidate)
        for candidate in found.get("webhook-signature", "").split()
    )
