"""The locale fallback chain: the most specific translation a user's locale has."""

from __future__ import annotations

from notifyhub.services.locales import chain, pick

TRANSLATIONS = {"pt": "pt", "pt-BR": "pt-BR", "de": "de", "zh-Hant": "zh-Hant"}


def test_the_chain_goes_from_specific_to_general() -> None:
    assert chain("pt-BR") == ["pt-br", "pt"]
    assert chain("zh-Hant-TW") == ["zh-hant-tw", "zh-hant", "zh"]
    assert chain(None) == [] and chain("") == []


def test_pick_falls_back_then_to_the_default() -> None:
    assert pick("pt-BR", TRANSLATIONS) == "pt-BR"
    assert pick("pt-br", TRANSLATIONS) == "pt-BR"  # tags compare without case
    assert pick("pt-PT", TRANSLATIONS) == "pt"
    assert pick("zh-Hant-TW", TRANSLATIONS) == "zh-Hant"
    assert pick("zh-CN", TRANSLATIONS) is None
    assert pick("fr", TRANSLATIONS) is None and pick(None, TRANSLATIONS) is None
    assert pick("de-AT", {}) is None
