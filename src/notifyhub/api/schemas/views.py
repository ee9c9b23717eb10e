"""Bodies of views (a user's inbox tabs): their filters and lists."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from notifyhub.api.schemas.common import (
    TIME_EXAMPLE,
    Categories,
    Documented,
    Instant,
    Strict,
    Tags,
    examples,
    single_line,
)
from notifyhub.domain.notification import Severity

ViewName = Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[a-z0-9][a-z0-9_-]*$")]
"""A view's name: a lowercase slug, the key of its counts (`counts.views`) and `?view=`."""


class ViewFilterIn(Strict):
    """Which notifications a view holds: all of what is given must hold (an empty filter
    holds every notification). It is over what a notification carries for good, so a
    notification's views are known when it is stored."""

    model_config = examples(
        {"tags_any": ["mention"]},
        {"categories": ["billing", "invoices"], "severity_at_least": "warning"},
    )

    categories: Categories = Field(default_factory=list)
    """One of these categories (up to 10)."""
    tags_any: Tags = Field(default_factory=list)
    """At least one of these tags (up to 10)."""
    tags_all: Tags = Field(default_factory=list)
    """Every one of these tags (up to 10)."""
    severity_at_least: Severity | None = None
    """This severity or a higher one (info < success < warning < error < critical)."""


class ViewIn(Strict):
    """A view (tab) to create or replace."""

    model_config = examples(
        {"filter": {"tags_any": ["mention"]}, "label": "Mentions"},
        {"filter": {"severity_at_least": "error"}, "label": "Alarms"},
    )

    filter: ViewFilterIn
    """Which notifications it holds."""
    label: Annotated[str, AfterValidator(single_line)] | None = Field(
        None, min_length=1, max_length=64
    )
    """What a front end shows as the tab's title (the name when absent)."""


class ViewOut(Documented):
    """One view (tab)."""

    model_config = examples(
        {
            "name": "mentions",
            "label": "Mentions",
            "filter": {"tags_any": ["mention"]},
            "scope": "personal",
            "updated_at": TIME_EXAMPLE,
        }
    )

    name: str
    """Its name: the key of its counts in `counts.views` and the `?view=` of its list."""
    label: str | None
    """Its title for a front end (null: show the name)."""
    filter: dict[str, Any]
    """Its filter (`ViewFilterIn`), only what is set."""
    scope: Literal["tenant", "personal"]
    """`tenant`: an admin defined it for every user of the tenant; `personal`: the user's own."""
    updated_at: Instant | None
    """When it was last created or changed."""


class ViewList(Documented):
    """Views (tabs), the tenant's first, each set by name."""

    model_config = examples(
        {
            "views": [
                {
                    "name": "alarms",
                    "label": "Alarms",
                    "filter": {"severity_at_least": "error"},
                    "scope": "tenant",
                    "updated_at": TIME_EXAMPLE,
                }
            ]
        }
    )

    views: list[ViewOut]
    next_cursor: str | None = None
    """The admin list's next page (`?cursor=`); null on the last page and for a user's
    own list (never paged)."""
