"""Bodies of topics and their subscribers."""

from __future__ import annotations

from pydantic import Field

from notifyhub.api.schemas.common import Documented, Name, Strict, UserId, examples


class TopicMembersIn(Strict):
    """A topic's subscribers: users, and groups (whose members are subscribed)."""

    model_config = examples({"users": ["alice"], "groups": ["replenishers"]})

    users: list[UserId] = Field(default_factory=list, max_length=200_000)
    """Subscribed user ids."""
    groups: list[Name] = Field(default_factory=list, max_length=1000)
    """Subscribed groups of the tenant (an unknown one is a 422)."""


class TopicPatch(Strict):
    """Subscribers to add to and remove from a topic."""

    model_config = examples({"add": {"users": ["bob"]}, "remove": {"groups": ["replenishers"]}})

    add: TopicMembersIn = Field(default_factory=TopicMembersIn)
    """Users and groups to subscribe."""
    remove: TopicMembersIn = Field(default_factory=TopicMembersIn)
    """Users and groups to unsubscribe."""


class TopicOut(Documented):
    """A topic and its subscribers."""

    model_config = examples(
        {"name": "restock", "tenant": "default", "users": ["alice"], "groups": ["replenishers"]}
    )

    name: str
    """The topic's name."""
    tenant: str
    """Its tenant."""
    users: list[str]
    """Subscribed user ids."""
    groups: list[str]
    """Subscribed groups."""


class TopicSummary(Documented):
    """A topic and how many subscribers it has."""

    model_config = examples(
        {"name": "restock", "tenant": "default", "user_count": 120, "group_count": 2}
    )

    name: str
    """The topic's name."""
    tenant: str
    """Its tenant."""
    user_count: int
    """Users subscribed by name."""
    group_count: int
    """Groups subscribed (their members are not counted here)."""


class TopicPage(Documented):
    """A page of the tenant's topics, by name."""

    model_config = examples(
        {
            "topics": [
                {"name": "restock", "tenant": "default", "user_count": 120, "group_count": 2}
            ],
            "next_cursor": "restock",
        }
    )

    topics: list[TopicSummary]
    """Topics, by name."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""
