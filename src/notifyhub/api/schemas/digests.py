"""Request and response bodies of digests: the `digest` a publish or a rule names, and a
user's open digests as the admin API lists them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictInt, model_validator

from notifyhub.api.schemas.common import Documented, Instant, Strict, examples
from notifyhub.domain.digest import Digest

DigestKey = Annotated[str, Field(min_length=1, max_length=190, pattern=r"^[A-Za-z0-9._:/@-]+$")]
LocalTime = Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
MAX_WINDOW_S = 7 * 86_400
MAX_ITEMS = 1000


class DigestIn(Strict):
    """Notifications with the same `key` for the same user within the window reach the
    user's e-mail and push as ONE message (a summary: the count, the items, the actors),
    and their inbox as one thread (`digest:<key>` unless the publish names a
    `thread_key`). Severity `critical` is never digested."""

    key: DigestKey
    """What groups notifications into one digest (per user)."""
    window_s: Annotated[StrictInt, Field(ge=1, le=MAX_WINDOW_S)] | None = None
    """How long the window stays open, in seconds (default 600; not with `at`)."""
    max_items: Annotated[StrictInt, Field(ge=1, le=MAX_ITEMS)] = 50
    """A digest with this many items is sent at once, its window closed early."""
    mode: Literal["sliding", "fixed"] = "fixed"
    """`fixed`: it closes `window_s` after its first notification; `sliding`: `window_s`
    after its latest, at most 4 windows after its first."""
    first: Literal["now", "wait"] = "wait"
    """`now`: the first notification is sent at once, the rest of the window digested."""
    at: LocalTime | None = None
    """`HH:MM`: the window closes at the next such time in the user's time zone (their
    profile's `time_zone`, else UTC), daily; instead of `window_s`, mode `fixed`."""

    @model_validator(mode="after")
    def _at_is_fixed(self) -> DigestIn:
        if self.at is not None and self.mode != "fixed":
            raise ValueError("a digest with `at` closes at that time: mode `fixed` only")
        if self.at is not None and self.window_s is not None:
            raise ValueError("give `window_s` or `at`, not both")
        return self

    def domain(self) -> Digest:
        """The spec as the domain takes it."""
        fields = self.model_dump(exclude_none=True)
        return Digest(**fields)

    @classmethod
    def of(cls, digest: Digest | dict[str, Any]) -> DigestIn:
        """The spec as the API shows it (from the domain's, or its JSON)."""
        fields = digest.model_dump() if isinstance(digest, Digest) else dict(digest)
        if fields.get("at") is not None:
            fields.pop("window_s", None)
        return cls.model_validate({k: v for k, v in fields.items() if v is not None})


class DigestOut(Documented):
    """One of a user's open digests."""

    id: str
    key: str
    state: Literal["open", "full"]
    """`full`: `max_items` reached, sent on the worker's next pass."""
    items: int
    first_sent: bool
    opened_at: Instant
    due_at: Instant
    """When it is sent (the worker sends it within a few seconds after)."""
    spec: DigestIn


DIGEST_EXAMPLE: dict[str, Any] = {
    "id": "01KJPWG8904B3YTENFP0G2XFWR",
    "key": "post:p1:comments",
    "state": "open",
    "items": 3,
    "first_sent": False,
    "opened_at": "2026-03-02T09:00:00.000Z",
    "due_at": "2026-03-02T09:10:00.000Z",
    "spec": {"key": "post:p1:comments", "window_s": 600, "max_items": 50, "mode": "fixed"},
}


class UserDigests(Documented):
    """A user's digests not sent yet, the soonest due first."""

    model_config = examples({"tenant": "default", "user": "wren", "digests": [DIGEST_EXAMPLE]})

    tenant: str
    user: str
    digests: list[DigestOut]
    """Each open (or full, about to be sent) digest."""
