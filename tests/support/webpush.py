"""A browser's side of Web Push for tests: its key pair and auth secret, and the
`PushSubscription.toJSON()` it would send."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


@dataclass
class Browser:
    """One browser's subscription keys (RFC 8291: the user agent's ECDH pair and secret)."""

    private_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def public_raw(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )

    def subscription(self, endpoint: str, expiration_ms: int | None = None) -> dict[str, Any]:
        """What `PushSubscription.toJSON()` gives."""
        return {
            "endpoint": endpoint,
            "expirationTime": expiration_ms,
            "keys": {"p256dh": b64url(self.public_raw), "auth": b64url(self.auth)},
        }
