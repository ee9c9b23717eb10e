"""A user's rule subscriptions a page at a time, as the admin lists page: in key order
(rule, target id, relationship), after a cursor naming the last one shown, so rows added
or removed before it move no page."""

from __future__ import annotations

import re

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories.rules import SubscriptionKey
from notifyhub.domain.auth import UserPrincipal
from notifyhub.errors import InvalidInput
from notifyhub.services.listings import Page, page
from notifyhub.services.rules import RuleService, Subscription

CURSOR = r"^([A-Za-z0-9._:-]{1,100})/([^\x00-\x1F\x7F-\x9F]{1,200})/([A-Za-z0-9._:-]{1,64})$"
"""`rule/target id/relationship`: a rule's name and a relationship hold no `/`, so the
target id between them may (and no control character, as a target id)."""
_CURSOR = re.compile(CURSOR)
MAX_CURSOR = 366
"""The longest cursor: a rule's name, a target id and a relationship at their longest."""


def cursor_of(subscription: Subscription) -> str:
    """The cursor of the page after `subscription`."""
    return f"{subscription.rule}/{subscription.target.id}/{subscription.relationship}"


def _after(cursor: str | None) -> SubscriptionKey | None:
    if cursor is None:
        return None
    found = _CURSOR.fullmatch(cursor)
    if found is None:
        raise InvalidInput("cursor: not a cursor this list gave")
    rule, target_id, relationship = found.groups()
    return rule, target_id, relationship


async def read(
    rules: RuleService, session: AsyncSession, me: UserPrincipal, cursor: str | None, limit: int
) -> Page[Subscription]:
    """The user's subscriptions after `cursor` (None: the first page), and the next cursor."""
    found = await rules.subscriptions(session, me, _after(cursor), limit + 1)
    return page(found, limit, cursor_of)
