"""Bodies of groups of users and their members."""

from __future__ import annotations

from pydantic import Field, model_validator

from notifyhub.api.schemas.common import Documented, Strict, UserId, examples


class GroupOut(Documented):
    """A group of users in a tenant."""

    model_config = examples({"name": "replenishers", "tenant": "default", "members": 12})

    name: str
    """The group's name."""
    tenant: str
    """Its tenant."""
    members: int | None = None
    """How many users it holds."""


class GroupList(Documented):
    """The tenant's groups."""

    model_config = examples(
        {"groups": [{"name": "replenishers", "tenant": "default", "members": 12}]}
    )

    groups: list[GroupOut]
    """Every group of the tenant, by name."""


class MembersChange(Strict):
    """Users to add to and remove from a group (adding one already there is a no-op)."""

    model_config = examples({"add": ["alice", "bob"], "remove": ["carol"]})

    add: list[UserId] = Field(default_factory=list, max_length=10_000)
    """User ids to add."""
    remove: list[UserId] = Field(default_factory=list, max_length=10_000)
    """User ids to remove (not also in `add`: which would win is no one's guess)."""

    @model_validator(mode="after")
    def _each_user_one_way(self) -> MembersChange:
        both = sorted(set(self.add) & set(self.remove))
        if both:
            shown = ", ".join(both[:5]) + (", …" if len(both) > 5 else "")
            raise ValueError(f"users both added and removed: {shown}")
        return self


class MembersPage(Documented):
    """One page of a group's members, by user id."""

    model_config = examples({"members": ["alice", "bob"], "next_cursor": "bob"})

    members: list[str]
    """User ids, in order."""
    next_cursor: str | None
    """Pass as `?cursor=` for the next page; null on the last page."""
