"""Languages: a user's locale (in their preferences) picks, among a template's
translations, the one to render, by a fallback chain: `pt-BR`, then `pt`, then the
template's default. Rules and producers group their recipients by the translation they
get and send one notification per group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import preferences as repo

LOCALE = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$"
"""A BCP 47 language tag, as browsers send them: `pt`, `pt-BR`, `zh-Hant-TW`."""
MAX_TRANSLATIONS = 20

T = TypeVar("T")


def chain(locale: str | None) -> list[str]:
    """Where a locale falls back to, most specific first, lowercased: `pt-BR` gives
    `pt-br`, `pt`; None gives nothing (the default)."""
    if not locale:
        return []
    parts = locale.lower().split("-")
    return ["-".join(parts[:n]) for n in range(len(parts), 0, -1)]


def pick(locale: str | None, translations: Mapping[str, T]) -> str | None:
    """The key of `translations` a user of `locale` gets (None: the default)."""
    by_tag = {tag.lower(): tag for tag in translations}
    return next((by_tag[tag] for tag in chain(locale) if tag in by_tag), None)


async def group_users(
    session: AsyncSession,
    tenant: str,
    users: Sequence[str],
    translations: Mapping[str, T],
) -> dict[str | None, list[str]]:
    """`users` by the translation each gets (None: the default); one group, without a
    lookup, when there are no translations."""
    if not translations or not users:
        return {None: list(users)}
    locales = await repo.locales_of(session, tenant, users)
    groups: dict[str | None, list[str]] = {}
    for user in users:
        groups.setdefault(pick(locales.get(user), translations), []).append(user)
    return groups
