"""JWT verification: the attack list of RELIABILITY.md, and the happy paths."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import HMACAlgorithm

from notifyhub.domain.auth import UserPrincipal
from notifyhub.errors import AuthenticationError, InvalidInput
from notifyhub.services.tokens import PreparedHMAC, TokenService
from notifyhub.settings import Settings

SECRET = "s" * 40


def hs_settings(**extra: Any) -> Settings:
    return Settings(jwt_secret=SECRET, _env_file=None, **extra)  # type: ignore[arg-type, call-arg]


def claims(**overrides: Any) -> dict[str, Any]:
    return {"sub": "alice", "aud": "notifyhub", "exp": int(time.time()) + 3600, **overrides}


def rsa_pair() -> tuple[Any, str]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public.decode()


def test_hs256_round_trip_and_tenant() -> None:
    service = TokenService(hs_settings())
    token = jwt.encode(claims(tenant="acme"), SECRET, algorithm="HS256")
    assert service.verify_user_token(token) == UserPrincipal(tenant="acme", user="alice")
    minted = service.mint_user_token("bob")
    assert service.verify_user_token(minted) == UserPrincipal(tenant="default", user="bob")


def _unsigned(payload: dict[str, Any]) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(payload)}."


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (_unsigned(claims()), "invalid token"),
        (jwt.encode(claims(exp=int(time.time()) - 10), SECRET, algorithm="HS256"), "expired"),
        (jwt.encode({"sub": "alice", "aud": "notifyhub"}, SECRET, algorithm="HS256"), "exp"),
        (jwt.encode(claims(aud="other"), SECRET, algorithm="HS256"), "audience"),
        (jwt.encode(claims(), "x" * 40, algorithm="HS256"), "invalid token"),
        (jwt.encode(claims(tenant="bad tenant!"), SECRET, algorithm="HS256"), "tenant"),
        (jwt.encode(claims(tenant="acme\n"), SECRET, algorithm="HS256"), "tenant"),
        (jwt.encode(claims(sub="alice\n"), SECRET, algorithm="HS256"), "sub"),
        (jwt.encode(claims(sub="a\x00b"), SECRET, algorithm="HS256"), "sub"),
        ("garbage", "invalid token"),
    ],
)
def test_rejected_user_tokens(token: str, reason: str) -> None:
    with pytest.raises(AuthenticationError, match=reason):
        TokenService(hs_settings()).verify_user_token(token)


def test_tampered_payload_is_rejected() -> None:
    token = jwt.encode(claims(), SECRET, algorithm="HS256")
    header, _, signature = token.split(".")
    forged = (
        base64.urlsafe_b64encode(json.dumps(claims(sub="admin")).encode()).rstrip(b"=").decode()
    )
    with pytest.raises(AuthenticationError):
        TokenService(hs_settings()).verify_user_token(f"{header}.{forged}.{signature}")


def test_wrong_issuer_when_configured() -> None:
    service = TokenService(hs_settings(jwt_issuer="https://idp.example"))
    with pytest.raises(AuthenticationError, match="issuer"):
        service.verify_user_token(jwt.encode(claims(iss="https://evil"), SECRET, algorithm="HS256"))
    ok = jwt.encode(claims(iss="https://idp.example"), SECRET, algorithm="HS256")
    assert service.verify_user_token(ok).user == "alice"


def test_rs256_and_the_hs256_confusion_attack() -> None:
    private, public = rsa_pair()
    service = TokenService(Settings(jwt_algorithm="RS256", jwt_public_key=public, _env_file=None))  # type: ignore[call-arg]
    good = jwt.encode(claims(), private, algorithm="RS256")
    assert service.verify_user_token(good).user == "alice"
    # An attacker signs HS256 with the public key text as the HMAC secret.
    import hashlib
    import hmac

    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")
    body = base64.urlsafe_b64encode(json.dumps(claims()).encode()).rstrip(b"=")
    mac = hmac.new(public.encode(), header + b"." + body, hashlib.sha256).digest()
    forged = b".".join([header, body, base64.urlsafe_b64encode(mac).rstrip(b"=")]).decode()
    with pytest.raises(AuthenticationError):
        service.verify_user_token(forged)
    with pytest.raises(InvalidInput):
        service.mint_user_token("alice")


def test_es256_with_a_jwks_file(tmp_path: Path) -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private.public_key()))
    jwk["kid"] = "k1"
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    service = TokenService(
        Settings(jwt_algorithm="ES256", jwt_public_key=str(path), _env_file=None)
    )  # type: ignore[call-arg]
    token = jwt.encode(claims(), private, algorithm="ES256", headers={"kid": "k1"})
    assert service.verify_user_token(token).user == "alice"


def test_stream_tokens_and_user_tokens_do_not_mix() -> None:
    service = TokenService(hs_settings())
    me = UserPrincipal(tenant="default", user="alice")
    stream_token, expires_at = service.mint_stream_token(me)
    assert service.verify_stream_token(stream_token) == me
    assert 55 <= expires_at.timestamp() - time.time() <= 61
    with pytest.raises(AuthenticationError):
        service.verify_user_token(stream_token)
    with pytest.raises(AuthenticationError):
        service.verify_stream_token(service.mint_user_token("alice"))
    # A stream token signed with the raw secret (not the derived key) is refused too.
    raw = jwt.encode(claims(typ="stream"), SECRET, algorithm="HS256")
    with pytest.raises(AuthenticationError):
        service.verify_stream_token(raw)


def test_settings_refuse_a_short_secret_outside_dev_mode() -> None:
    with pytest.raises(ValueError, match="32 characters"):
        Settings(jwt_secret="short", redis_url="redis://x", _env_file=None)  # type: ignore[arg-type, call-arg]


def test_hs256_keys_are_prepared_once_and_still_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PyJWT's HS256 is `PreparedHMAC`: a key is checked and prepared on its first token
    only; a key the checks refuse (an asymmetric public key as an HMAC secret) is refused
    on every try, and a token signed with another secret still fails."""
    hs256 = jwt.get_algorithm_by_name("HS256")
    assert isinstance(hs256, PreparedHMAC)
    prepared: list[str | bytes] = []
    checked = HMACAlgorithm.prepare_key

    def counting(self: HMACAlgorithm, key: str | bytes) -> bytes:
        prepared.append(key)
        return checked(self, key)

    monkeypatch.setattr(HMACAlgorithm, "prepare_key", counting)
    for i in range(PreparedHMAC.KEYS_KEPT + 1):  # keys prepared before (other tests) go
        jwt.encode(claims(), f"earlier-{i}-" + "k" * 40, algorithm="HS256")
    secret = "prepared-once-" + "k" * 40
    service = TokenService(Settings(jwt_secret=secret, _env_file=None))  # type: ignore[arg-type, call-arg]
    for _ in range(3):
        token = jwt.encode(claims(), secret, algorithm="HS256")
        assert service.verify_user_token(token).user == "alice"
    assert prepared.count(secret) == 1
    with pytest.raises(AuthenticationError):
        service.verify_user_token(jwt.encode(claims(), "another-" + "k" * 40, algorithm="HS256"))
    _, public = rsa_pair()
    for _ in range(2):
        with pytest.raises(jwt.InvalidKeyError):
            jwt.encode(claims(), public, algorithm="HS256")
    assert prepared.count(public) == 2
