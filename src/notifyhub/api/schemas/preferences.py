"""Bodies of a user's preferences: per category, and their locale."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool

from notifyhub.api.schemas.common import TOKEN, Category, Strict, examples
from notifyhub.services.locales import LOCALE
from notifyhub.services.preferences import CategoryPreference


class CategoryPreferenceIn(Strict):
    """How one category reaches the user: one switch per channel (severity `critical`
    bypasses every opt-out)."""

    model_config = examples({"inbox": True, "push": False, "email": True})

    inbox: StrictBool = True
    """`false` drops the category's notifications (unless `critical`)."""
    push: StrictBool = True
    """`false` keeps them in the inbox but interrupts no one: no live `notification`
    event, no Web Push."""
    email: StrictBool = True
    """`false`: no e-mail for the category (a notification sent with `channels: [email]`)."""

    @classmethod
    def of(cls, found: CategoryPreference) -> CategoryPreferenceIn:
        return cls(inbox=found.inbox, push=found.push, email=found.email)

    def preference(self) -> CategoryPreference:
        return CategoryPreference(inbox=self.inbox, push=self.push, email=self.email)


class PreferencesIn(Strict):
    """The user's preferences, per category (categories not named get the defaults)."""

    model_config = examples(
        {"categories": {"restock": {"inbox": True, "push": False}}, "locale": "pt-BR"}
    )

    categories: dict[Category, CategoryPreferenceIn] = Field(
        default_factory=dict,
        max_length=200,
        json_schema_extra={"propertyNames": {"minLength": 1, "maxLength": 64, "pattern": TOKEN}},
    )
    """By category name; `PUT` replaces them all (left out: unchanged)."""
    locale: Annotated[str, Field(max_length=35, pattern=LOCALE)] | None = None
    """The user's language, a BCP 47 tag (`pt-BR`): rules and producers with translations
    send theirs, falling back `pt-BR` -> `pt` -> their default; null: the default (`PUT`
    with null clears it, without it leaves it unchanged)."""


class PreferenceDefaultsIn(Strict):
    """A tenant's default switches per category and channel, for users without their own
    preferences for that category. They decide the e-mail and Web Push sends; the inbox
    and live-event decisions, made atomically with each copy in Redis, follow users' own
    preferences only."""

    model_config = examples(
        {"categories": {"digest": {"inbox": True, "push": False, "email": False}}}
    )

    categories: dict[Category, CategoryPreferenceIn] = Field(
        default_factory=dict,
        max_length=200,
        json_schema_extra={"propertyNames": {"minLength": 1, "maxLength": 64, "pattern": TOKEN}},
    )
    """By category name; `PUT` replaces them all."""


class PreferenceDefaultsOut(PreferenceDefaultsIn):
    """The tenant's default preferences."""

    model_config = examples(
        {
            "tenant": "default",
            "categories": {"digest": {"inbox": True, "push": False, "email": False}},
        }
    )

    tenant: str
