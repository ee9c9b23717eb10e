"""Bodies of the admin's user lookup and token revocation."""

from __future__ import annotations

from datetime import datetime

from notifyhub.api.schemas.common import TIME_EXAMPLE, Documented, examples
from notifyhub.api.schemas.preferences import PreferencesIn
from notifyhub.api.schemas.rules import SubscriptionOut
from notifyhub.domain.notification import Counts

_SUBSCRIPTION = {
    "rule": "comment_created_post",
    "target": {"type": "post", "id": "p-981"},
    "relationship": "follower",
    "obtain": "pull",
}


class TokensRevoked(Documented):
    """A user's tokens revoked: those issued at or before `not_before` are refused."""

    model_config = examples({"tenant": "default", "user": "alice", "not_before": TIME_EXAMPLE})

    tenant: str
    """The user's tenant."""
    user: str
    """The user id."""
    not_before: datetime
    """The user's tokens issued (`iat`) at or before this second, and tokens without
    `iat`, are refused (401); their streams opened with such tokens have ended, in every
    hub process. A later revocation moves it on, never back."""


class UserOut(Documented):
    """One user as the hub holds them now."""

    model_config = examples(
        {
            "tenant": "default",
            "user": "alice",
            "counts": {"unread": 3, "unseen": 1, "total": 17},
            "seq": 42,
            "streams_open": 2,
            "preferences": {"categories": {"restock": {"inbox": True, "push": False}}},
            "subscriptions": [_SUBSCRIPTION],
            "groups": ["replenishers"],
            "topics": ["restock"],
        }
    )

    tenant: str
    """The user's tenant."""
    user: str
    """The user id, as the calling application knows it."""
    counts: Counts
    """Their inbox's counts."""
    seq: int
    """The seq of their last inbox change (0: none yet); a stream's event ids carry it."""
    streams_open: int
    """Streams open for them now, in every hub process, as each process last reported
    them (at most `NOTIFYHUB_STREAM__PRESENCE_INTERVAL_S`, 5 s, old)."""
    preferences: PreferencesIn
    """Their per-category preferences (categories not named get the defaults)."""
    subscriptions: list[SubscriptionOut]
    """Their rule subscriptions."""
    groups: list[str]
    """The groups holding them, by name (the first 1000)."""
    topics: list[str]
    """The topics subscribing them, by name or through one of their groups (the first
    1000)."""
