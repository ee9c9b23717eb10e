"""The hub's VAPID key pair (RFC 8292): what browsers subscribe with
(`applicationServerKey`) and what signs every push request.

One pair per installation: `NOTIFYHUB_WEBPUSH__VAPID_PRIVATE_KEY` when set; else the
pair in PostgreSQL's `vapid_keys`, made by the first hub to start (two starting at once
both offer one, the first insert wins, both use it). A browser subscribed with one public
key cannot receive pushes signed by another, so the pair must never change by accident.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from notifyhub.db.repositories import vapid as repo
from notifyhub.db.unit import Units
from notifyhub.outages import outage_of
from notifyhub.settings import WebPushSettings

log = logging.getLogger(__name__)


def b64url(raw: bytes) -> str:
    """base64url without padding, as Web Push writes keys."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def from_b64url(text: str) -> bytes:
    """Decode base64url, padded or not (ValueError when it is not base64url)."""
    if not text or any(c not in _B64URL for c in text.rstrip("=")):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not base64url") from exc


_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def is_p256_point(raw: bytes) -> bool:
    """Whether `raw` is an uncompressed point on P-256 (what a browser's p256dh is)."""
    if len(raw) != 65 or raw[0] != 0x04:
        return False
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        return False
    return True


def public_point(key: ec.EllipticCurvePrivateKey) -> str:
    """The key's public half as browsers take it: base64url of the uncompressed point."""
    raw = key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return b64url(raw)


def to_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


def parse_private_key(text: str) -> ec.EllipticCurvePrivateKey:
    """A P-256 private key from PEM, or from base64url of the raw 32-byte scalar (or of
    DER), the forms py-vapid and web-push tools print. ValueError otherwise."""
    text = text.strip()
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_private_key(text.encode("ascii"), password=None)
    else:
        raw = from_b64url(text)
        if len(raw) == 32:
            key = ec.derive_private_key(int.from_bytes(raw, "big"), ec.SECP256R1())
        else:
            key = serialization.load_der_private_key(raw, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ValueError("a VAPID key must be a P-256 (secp256r1) EC private key")
    return key


@dataclass(frozen=True, slots=True)
class VapidPair:
    private_key: ec.EllipticCurvePrivateKey
    public_key: str
    """base64url of the uncompressed P-256 point."""
    subject: str
    """The JWT's `sub`: a `mailto:` or `https:` URL."""


class VapidKeys:
    """The installation's pair, read (or made) once per process and kept."""

    def __init__(self, settings: WebPushSettings, units: Units) -> None:
        self._settings = settings
        self._units = units
        self._pair: VapidPair | None = None
        self._lock = asyncio.Lock()
        configured = settings.vapid_private_key
        if configured is not None:
            key = parse_private_key(configured.get_secret_value())
            self._pair = VapidPair(key, public_point(key), settings.subject)

    async def pair(self) -> VapidPair:
        """The pair; the first call reads PostgreSQL (making the pair if none is stored)."""
        if self._pair is not None:
            return self._pair
        async with self._lock:
            if self._pair is None:
                self._pair = await self._load()
        return self._pair

    async def public_key(self) -> str:
        return (await self.pair()).public_key

    async def warm(self) -> None:
        """At start-up: make or read the pair now, so it exists before the first browser
        asks. A store outage only postpones it to the first use (logged)."""
        try:
            await self.pair()
        except Exception as exc:
            if outage_of(exc) is None:
                raise
            log.warning("VAPID keys not read at start-up (%s): read on first use", exc)

    async def _load(self) -> VapidPair:
        offered = ec.generate_private_key(ec.SECP256R1())
        async with self._units() as unit:
            pem, public = await repo.ensure(unit.session, to_pem(offered), public_point(offered))
        key = parse_private_key(pem)
        if public_point(key) != public:
            raise RuntimeError("vapid_keys holds a public key that is not its private key's")
        return VapidPair(key, public, self._settings.subject)
