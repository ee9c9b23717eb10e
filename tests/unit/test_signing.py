"""Standard Webhooks v1 signing: the known-answer vector, rotation, tampering."""

from __future__ import annotations

from notifyhub.services import signing

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'


def test_known_answer_vector() -> None:
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert signing.sign(SECRET, MSG_ID, TIMESTAMP, BODY) == expected


def test_rotation_sends_one_signature_per_secret_and_each_verifies() -> None:
    new = signing.new_secret()
    headers = signing.headers([new, SECRET], MSG_ID, TIMESTAMP, BODY)
    assert headers["webhook-id"] == MSG_ID
    assert len(headers["webhook-signature"].split()) == 2
    assert signing.verify(SECRET, headers, BODY, TIMESTAMP)
    assert signing.verify(new, headers, BODY, TIMESTAMP)


def test_tampering_and_stale_timestamps_fail() -> None:
    headers = signing.headers([SECRET], MSG_ID, TIMESTAMP, BODY)
    assert not signing.verify(SECRET, headers, BODY + b" ", TIMESTAMP)
    assert not signing.verify(SECRET, {**headers, "webhook-id": "msg_other"}, BODY, TIMESTAMP)
    assert not signing.verify(SECRET, headers, BODY, TIMESTAMP + 301)
    assert not signing.verify(signing.new_secret(), headers, BODY, TIMESTAMP)
    assert not signing.verify(SECRET, {}, BODY, TIMESTAMP)


def test_new_secrets_are_whsec_base64_of_24_bytes() -> None:
    secret = signing.new_secret()
    assert secret.startswith("whsec_") and len(secret) == len("whsec_") + 32
    assert secret != signing.new_secret()
