"""Web Push deliveries (RFC 8030, 8291, 8292): a notification sent to one browser's push
subscription, encrypted for that browser and signed with the hub's VAPID key.

A delivery of kind `webpush` names its subscription in its payload (`webpush_payload`);
the attempt loads it, encrypts the notification JSON (aes128gcm, RFC 8188 records with
RFC 8291's keys), and POSTs it to the subscription's endpoint through the outbox's
SSRF-guarded client with `TTL`, `Urgency`, `Topic` and `Authorization: vapid t=..,
k=..`. 2xx delivered it; 404/410 mean the browser unsubscribed: the subscription is
removed and the delivery ends (the definition stays enabled: one browser said it, not
the push service); 429 and 5xx retry (after `Retry-After` when given); any other 4xx
ends it with the push service's reply.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import urlsplit

import http_ece
import jwt
import orjson
from cryptography.hazmat.primitives.asymmetric import ec

from notifyhub.db.repositories import push_subscriptions as subscriptions
from notifyhub.db.repositories.push_subscriptions import PushSubscriptionRow
from notifyhub.db.unit import UnitOfWork, Units
from notifyhub.domain.delivery import Outcome
from notifyhub.services.deliveries import Kicker, enqueue
from notifyhub.services.outbound import Outbound
from notifyhub.services.vapid import VapidKeys, VapidPair, from_b64url

Urgency = Literal["very-low", "low", "normal", "high"]
URGENCIES: tuple[str, ...] = ("very-low", "low", "normal", "high")
DEFAULT_TTL_S = 86400
MAX_TTL_S = 28 * 86400
"""What push services keep at most (FCM: 4 weeks); a longer TTL is sent as this."""
TOPIC = re.compile(r"[A-Za-z0-9_-]{1,32}")
"""RFC 8030 5.4: at most 32 characters of the base64url alphabet."""
RECORD_SIZE = 4096
"""One aes128gcm record: what every push service must accept (RFC 8291 section 4)."""
MAX_PLAINTEXT = RECORD_SIZE - 86 - 16 - 1
"""The header (86 bytes with a P-256 key id), the tag and the padding delimiter."""
JWT_LIFETIME_S = 12 * 3600
"""A VAPID token's `exp` (RFC 8292: at most 24 hours ahead)."""
TOKEN_REUSE_S = JWT_LIFETIME_S // 2
"""A kept VAPID token is signed anew once this old, so every token sent has at least
half its lifetime left (a push service's clock may run ahead of ours)."""
TOKENS_KEPT = 1024
"""Audiences (push services' origins) whose tokens are kept; past that all are dropped."""
REPLY_BYTES = 300
"""How much of a refusing push service's reply the attempt's history keeps."""
CONTROL = ("subscription_id", "ttl_s", "urgency", "topic")
LOOKUPS = 2
"""Subscription reads and removals open at once: the sender's pool (4 connections, 8 under
load) also claims and settles, and 64 sends each holding one starved the dispatcher
(`QueuePool limit ... reached` in the Web Push bench); a read by key takes a moment."""


def webpush_payload(
    subscription_id: str,
    notification: dict[str, Any],
    *,
    ttl_s: int = DEFAULT_TTL_S,
    urgency: Urgency = "normal",
    topic: str | None = None,
) -> dict[str, Any]:
    """A `webpush` delivery's payload: which subscription, what to send (`notification`,
    any JSON object, up to `MAX_PLAINTEXT` bytes serialized) and how (RFC 8030: `ttl_s`
    the push service keeps it while the browser is away, `urgency`, and `topic`, which
    replaces an undelivered push of the same topic). ValueError for a bad one."""
    if not 0 <= ttl_s <= MAX_TTL_S:
        raise ValueError(f"ttl_s must be within 0..{MAX_TTL_S}")
    if urgency not in URGENCIES:
        raise ValueError(f"urgency must be one of {', '.join(URGENCIES)}")
    if topic is not None and not TOPIC.fullmatch(topic):
        raise ValueError("topic must be 1 to 32 characters of A-Z a-z 0-9 - _")
    size = len(orjson.dumps(notification))
    if size > MAX_PLAINTEXT:
        raise ValueError(f"notification must serialize to at most {MAX_PLAINTEXT} bytes")
    payload: dict[str, Any] = {
        "subscription_id": subscription_id,
        "notification": notification,
        "ttl_s": ttl_s,
        "urgency": urgency,
    }
    if topic is not None:
        payload["topic"] = topic
    return payload


async def enqueue_webpush(
    unit: UnitOfWork,
    definition: str,
    subscription: PushSubscriptionRow,
    notification: dict[str, Any],
    *,
    ttl_s: int = DEFAULT_TTL_S,
    urgency: Urgency = "normal",
    topic: str | None = None,
    description: str | None = None,
    sender: Kicker | None = None,
) -> str:
    """Add a delivery of `notification` to one push subscription inside the caller's
    unit of work, on the subscription's tenant's `definition` (of kind `webpush`); its
    id. Sent after the unit commits (at once with a `sender`), never after a rollback."""
    payload = webpush_payload(
        subscription.id, notification, ttl_s=ttl_s, urgency=urgency, topic=topic
    )
    return await enqueue(
        unit, definition, payload, description, tenant=subscription.tenant, sender=sender
    )


def encrypt(plaintext: bytes, p256dh: str, auth: str) -> bytes:
    """RFC 8291: `plaintext` as one aes128gcm record for the browser's keys, under a new
    ephemeral key pair (its public key is the record header's key id)."""
    ephemeral = ec.generate_private_key(ec.SECP256R1())
    encrypted: bytes = http_ece.encrypt(
        plaintext,
        private_key=ephemeral,
        dh=from_b64url(p256dh),
        auth_secret=from_b64url(auth),
        version="aes128gcm",
        rs=RECORD_SIZE,
    )
    return encrypted


def origin_of(endpoint: str) -> str:
    """The endpoint's origin, the VAPID token's audience: `https://push.example.net`."""
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"


def vapid_authorization(pair: VapidPair, endpoint: str, now: float | None = None) -> str:
    """RFC 8292's `Authorization: vapid t=<ES256 JWT>, k=<public key>` for `endpoint`."""
    issued = int(now if now is not None else time.time())
    claims = {"aud": origin_of(endpoint), "exp": issued + JWT_LIFETIME_S, "sub": pair.subject}
    token = jwt.encode(claims, pair.private_key, algorithm="ES256")
    return f"vapid t={token}, k={pair.public_key}"


class VapidTokens:
    """`vapid_authorization` kept per key and audience for TOKEN_REUSE_S: RFC 8292 lets a
    token serve every push to one push service until its `exp`, and signing one (ES256)
    costs about a fifth of a push's crypto (35 us against 135 us to encrypt, timeit)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._kept: dict[tuple[str, str, str], tuple[float, str]] = {}

    def authorization(self, pair: VapidPair, endpoint: str) -> str:
        """The `Authorization` header for a push to `endpoint`, signed now or kept."""
        now = self._clock()
        key = (pair.public_key, pair.subject, origin_of(endpoint))
        kept = self._kept.get(key)
        if kept is not None and 0 <= now - kept[0] < TOKEN_REUSE_S:
            return kept[1]
        if len(self._kept) >= TOKENS_KEPT:
            self._kept.clear()
        header = vapid_authorization(pair, endpoint, now)
        self._kept[key] = (now, header)
        return header


def _failed(error: str) -> Outcome:
    """A delivery no attempt can send (a bad payload, a removed subscription)."""
    return Outcome(None, error, 0.0, final=True, per_recipient=True)


def _plan(payload: Any) -> tuple[str, bytes, dict[str, str]] | str:
    """(subscription id, plaintext, headers) of a payload, or why it cannot be sent."""
    if not isinstance(payload, dict) or not isinstance(payload.get("subscription_id"), str):
        return "payload has no `subscription_id`"
    notification = payload.get("notification")
    if notification is None:
        notification = {k: v for k, v in payload.items() if k not in CONTROL}
    ttl_s, urgency, topic = (payload.get(k) for k in ("ttl_s", "urgency", "topic"))
    ttl_s = DEFAULT_TTL_S if ttl_s is None else ttl_s
    if not isinstance(ttl_s, int) or isinstance(ttl_s, bool) or ttl_s < 0:
        return "`ttl_s` must be a whole number of seconds"
    urgency = urgency or "normal"
    if urgency not in URGENCIES:
        return f"`urgency` must be one of {', '.join(URGENCIES)}"
    if topic is not None and not (isinstance(topic, str) and TOPIC.fullmatch(topic)):
        return "`topic` must be 1 to 32 characters of A-Z a-z 0-9 - _"
    plaintext = orjson.dumps(notification)
    if len(plaintext) > MAX_PLAINTEXT:
        return f"notification too large for Web Push ({len(plaintext)} > {MAX_PLAINTEXT} bytes)"
    headers = {"ttl": str(min(ttl_s, MAX_TTL_S)), "urgency": urgency}
    if topic is not None:
        headers["topic"] = topic
    return payload["subscription_id"], plaintext, headers


class WebPushTarget:
    """Sends one `webpush` delivery attempt and says what came of it; reads and removes
    subscriptions in autocommitted units of its own (the sender's: the send falls
    between its claim and settlement, outside any transaction)."""

    def __init__(self, units: Units, outbound: Outbound, vapid: VapidKeys) -> None:
        self._units = units
        self._outbound = outbound
        self._vapid = vapid
        self._tokens = VapidTokens()
        self._lookups = asyncio.Semaphore(LOOKUPS)

    async def send(self, tenant: str, payload: Any, timeout_s: float) -> Outcome:
        plan = _plan(payload)
        if isinstance(plan, str):
            return _failed(plan)
        subscription_id, plaintext, headers = plan
        async with self._lookups, self._units(autocommit=True) as unit:
            subscription = await subscriptions.get(unit.session, tenant, subscription_id)
        if subscription is None:
            return _failed(f"subscription gone (no push subscription {subscription_id})")
        headers["authorization"] = self._tokens.authorization(
            await self._vapid.pair(), subscription.endpoint
        )
        headers["content-encoding"] = "aes128gcm"
        body = encrypt(plaintext, subscription.p256dh, subscription.auth)
        outcome = await self._outbound.post(
            subscription.endpoint,
            body,
            headers,
            timeout_s,
            content_type="application/octet-stream",
            reply_bytes=REPLY_BYTES,
        )
        return await self._judged(subscription, outcome)

    async def _judged(self, subscription: PushSubscriptionRow, outcome: Outcome) -> Outcome:
        """The push service's answer as the outbox reads it (see the module's docstring)."""
        status = outcome.status_code
        if status in (404, 410):
            async with self._lookups, self._units(autocommit=True) as unit:
                await subscriptions.remove_endpoint(
                    unit.session, subscription.tenant, subscription.endpoint
                )
            error = f"subscription gone ({status})"
            return Outcome(status, error, outcome.duration_s, final=True, per_recipient=True)
        if status is not None and 400 <= status < 500 and status != 429:
            return Outcome(
                status, outcome.error, outcome.duration_s, final=True, per_recipient=True
            )
        return outcome
