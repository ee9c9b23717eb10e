"""Bodies of a user's preferences: per category, and their locale."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool

from notifyhub.api.schemas.common import TOKEN, Category, Strict, examples
from notifyhub.services.locales import LOCALE


class CategoryPreferenceIn(Strict):
    """How one category reaches the user."""

    model_config = examples({"inbox": True, "push": False})

    inbox: StrictBool = True
    """`false` drops the category's notifications (unless `critical`)."""
    push: StrictBool = True
    """`false` keeps them in the inbox but sends no live `notification` event."""


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
