"""User JWT verification, and the 60-second stream tokens browsers use for EventSource.

The accepted algorithm list is fixed by configuration, never read from the token.
Stream tokens are HS256 with a key derived from the configured key material, so every
hub process can verify them; they carry `typ: stream` and are refused on REST, while
user tokens are refused where a stream token is expected.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeGuard

import jwt
from jwt.algorithms import HMACAlgorithm

from notifyhub.domain.auth import WANTS_TOKEN, UserPrincipal, looks_like_api_key
from notifyhub.errors import AuthenticationError, InvalidInput
from notifyhub.settings import Settings

TENANT = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""A `tenant` claim, matched whole (`fullmatch`: `$` would let a trailing newline by)."""
STREAM_TYP = "stream"
MAX_SUB = 200


def valid_sub(sub: object) -> TypeGuard[str]:
    """A `sub` claim the hub takes: 1..200 printable characters."""
    return isinstance(sub, str) and 0 < len(sub) <= MAX_SUB and sub.isprintable()


def valid_tenant(tenant: object) -> TypeGuard[str]:
    return isinstance(tenant, str) and TENANT.fullmatch(tenant) is not None


class PreparedHMAC(HMACAlgorithm):
    """HMAC whose keys PyJWT checks and prepares once per key, not on every token.

    PyJWT prepares the key for each decode: it refuses secrets that look like asymmetric
    keys or JWKs by JSON-parsing the secret and trying it as a DER certificate, a large
    part of a verification (docs/scaling.md, "Design notes"). The same checks still run,
    once for each key: a key they refuse is refused every time (errors are not kept).
    Only the hub's own secrets reach it (the key comes from configuration, never from a
    token); the KEYS_KEPT keys prepared last are kept (a hub has two: the user tokens'
    and the stream tokens').
    """

    KEYS_KEPT = 8

    def __init__(self, hash_alg: Any) -> None:
        super().__init__(hash_alg)
        self._prepared: dict[str | bytes, bytes] = {}

    def prepare_key(self, key: str | bytes) -> bytes:
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = super().prepare_key(key)
            if len(self._prepared) >= self.KEYS_KEPT:  # the oldest goes
                del self._prepared[next(iter(self._prepared))]
            self._prepared[key] = prepared
        return prepared


def _use_prepared_hmac() -> None:
    """PyJWT's HS256, replaced by `PreparedHMAC` (PyJWT's public API for algorithms)."""
    if not isinstance(jwt.get_algorithm_by_name("HS256"), PreparedHMAC):
        jwt.unregister_algorithm("HS256")
        jwt.register_algorithm("HS256", PreparedHMAC(HMACAlgorithm.SHA256))


_use_prepared_hmac()


def _load_public(material: str) -> tuple[Any, dict[str, Any]]:
    """PEM text, a PEM file path, or a JWKS file path -> (default key, keys by kid)."""
    text = material
    if not material.lstrip().startswith(("-----", "{")) and Path(material).is_file():
        text = Path(material).read_text()
    if text.lstrip().startswith("{"):
        jwks = jwt.PyJWKSet.from_dict(json.loads(text))
        by_kid = {k.key_id: k.key for k in jwks.keys if k.key_id}
        return jwks.keys[0].key, by_kid
    return text, {}


class TokenService:
    def __init__(self, settings: Settings) -> None:
        self._algorithms: list[str] = [settings.jwt_algorithm]
        self._audience = settings.jwt_audience
        self._issuer = settings.jwt_issuer
        self._stream_ttl = timedelta(seconds=settings.stream.token_ttl_s)
        self._by_kid: dict[str, Any] = {}
        if settings.jwt_algorithm == "HS256":
            secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else ""
            self._key: Any = secret
            material = secret.encode()
        else:
            assert settings.jwt_public_key is not None
            self._key, self._by_kid = _load_public(settings.jwt_public_key)
            material = settings.jwt_public_key.encode()
        self._stream_key = hmac.new(
            material, b"notifyhub stream tokens v1", hashlib.sha256
        ).digest()

    def _verification_key(self, token: str) -> Any:
        if not self._by_kid:
            return self._key
        kid = jwt.get_unverified_header(token).get("kid")
        return self._by_kid.get(str(kid), self._key)

    def _decode(self, token: str, key: Any, algorithms: list[str]) -> dict[str, Any]:
        options = {"require": ["exp", "sub", "aud"]}
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=algorithms,
                audience=self._audience,
                issuer=self._issuer,
                options=options,  # type: ignore[arg-type]
            )
        except jwt.ExpiredSignatureError as exc:
            raise AuthenticationError("token expired") from exc
        except jwt.InvalidAudienceError as exc:
            raise AuthenticationError("invalid audience") from exc
        except jwt.InvalidIssuerError as exc:
            raise AuthenticationError("invalid issuer") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise AuthenticationError(f"token lacks the `{exc.claim}` claim") from exc
        except jwt.PyJWTError as exc:
            raise AuthenticationError("invalid token") from exc
        return claims

    @staticmethod
    def _principal(claims: dict[str, Any]) -> UserPrincipal:
        sub, tenant = claims.get("sub"), claims.get("tenant", "default")
        if not valid_sub(sub):
            raise AuthenticationError("invalid `sub` claim")
        if not valid_tenant(tenant):
            raise AuthenticationError("invalid `tenant` claim")
        iat = claims.get("iat")  # (PyJWT has checked that it is a number)
        issued_at = float(iat) if isinstance(iat, int | float) else None
        return UserPrincipal(tenant=tenant, user=sub, issued_at=issued_at)

    def verify_user_token(self, token: str) -> UserPrincipal:
        if looks_like_api_key(token):
            raise AuthenticationError(WANTS_TOKEN)
        try:
            key = self._verification_key(token)
        except jwt.PyJWTError as exc:
            raise AuthenticationError("invalid token") from exc
        claims = self._decode(token, key, self._algorithms)
        if claims.get("typ") == STREAM_TYP:
            raise AuthenticationError("stream tokens only open /v1/me/stream")
        return self._principal(claims)

    def mint_stream_token(self, principal: UserPrincipal) -> tuple[str, datetime]:
        now = datetime.now(UTC)
        expires = now + self._stream_ttl
        claims = {
            "sub": principal.user,
            "tenant": principal.tenant,
            "aud": self._audience,
            "typ": STREAM_TYP,
            "iat": now,  # a stream token is refused once the user's tokens are revoked
            "exp": expires,
        }
        return jwt.encode(claims, self._stream_key, algorithm="HS256"), expires

    def verify_stream_token(self, token: str) -> UserPrincipal:
        if looks_like_api_key(token):
            raise AuthenticationError(WANTS_TOKEN)
        claims = self._decode(token, self._stream_key, ["HS256"])
        if claims.get("typ") != STREAM_TYP:
            raise AuthenticationError("not a stream token")
        return self._principal(claims)

    def mint_user_token(self, user: str, tenant: str = "default", ttl_s: int = 3600) -> str:
        """Development tokens (HS256 only): production tokens come from your identity provider."""
        if self._algorithms != ["HS256"]:
            raise InvalidInput("user tokens can only be minted with an HS256 secret")
        if not valid_sub(user):  # a token every request would refuse (401) is none
            raise InvalidInput(f"user: 1 to {MAX_SUB} printable characters, not {user!r}")
        if not valid_tenant(tenant):
            raise InvalidInput(f"tenant: 1 to 64 of A-Z a-z 0-9 . _ -, not {tenant!r}")
        now = datetime.now(UTC)
        claims = {
            "sub": user,
            "tenant": tenant,
            "aud": self._audience,
            "iat": now,
            "exp": now + timedelta(seconds=ttl_s),
        }
        if self._issuer:
            claims["iss"] = self._issuer
        return jwt.encode(claims, self._key, algorithm="HS256")
