"""Bodies of the admin's user lookup and token revocation."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from notifyhub.api.schemas.common import (
    TIME_EXAMPLE,
    Documented,
    Instant,
    Strict,
    examples,
    single_line,
)
from notifyhub.api.schemas.deliveries import Email
from notifyhub.api.schemas.preferences import PreferencesIn
from notifyhub.api.schemas.quiet import QuietOut, QuietSchedule, TimeZone
from notifyhub.api.schemas.rules import SubscriptionOut
from notifyhub.domain.notification import Counts
from notifyhub.services.locales import LOCALE

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
    not_before: Instant
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
            "email": "alice@example.com",
            "locale": "pt-BR",
            "time_zone": "America/Sao_Paulo",
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
    """Their rule subscriptions by rule, target id and relationship (the first 1000)."""
    groups: list[str]
    """The groups holding them, by name (the first 1000)."""
    topics: list[str]
    """The topics subscribing them, by name or through one of their groups (the first
    1000)."""
    email: str | None = None
    """Their e-mail address (`PUT /v1/admin/users/{tenant}/{user}`; null: none)."""
    locale: str | None = None
    """Their language (as `preferences.locale`; null: the templates' defaults)."""
    time_zone: str | None = None
    """Their time zone, an IANA name (null: none given)."""
    quiet: QuietOut | None = None
    """Their quiet hours as they apply now (schedule, zone, quiet now until when)."""


Locale = Annotated[str, Field(max_length=35, pattern=LOCALE)]
UserEmail = Annotated[Email, AfterValidator(single_line)]
"""An address as `local@domain` (at most 254 characters, no spaces or control characters)."""


class UserProfileIn(Strict):
    """How to reach a user beyond their inbox: a field left out stays as it is, null
    clears it."""

    model_config = examples(
        {"email": "alice@example.com", "locale": "pt-BR", "time_zone": "America/Sao_Paulo"},
        {"time_zone": None},
    )

    email: UserEmail | None = None
    """Their e-mail address (e-mail deliveries of notifications use it)."""
    locale: Locale | None = None
    """Their language, a BCP 47 tag: the same as `locale` of `PUT /v1/me/preferences`."""
    time_zone: TimeZone | None = None
    """Their time zone, an IANA name (`Europe/Lisbon`)."""
    quiet: QuietSchedule | None = None
    """Their own quiet hours (e-mails and pushes wait until a window ends), read in
    `time_zone`: `{"mon-fri": ["22:00", "07:00"]}`; `{}`: none, whatever the tenant's
    default; null: the tenant's default applies."""


class UserProfileOut(Documented):
    """A user's addresses after the change."""

    model_config = examples(
        {
            "tenant": "default",
            "user": "alice",
            "email": "alice@example.com",
            "locale": "pt-BR",
            "time_zone": "America/Sao_Paulo",
        }
    )

    tenant: str
    """The user's tenant."""
    user: str
    """The user id."""
    email: str | None
    """Their e-mail address (null: none)."""
    locale: str | None
    """Their language (null: the templates' defaults)."""
    time_zone: str | None
    """Their time zone (null: none given)."""
    quiet: dict[str, list[str]] | None = None
    """Their own quiet hours (null: the tenant's default applies)."""
