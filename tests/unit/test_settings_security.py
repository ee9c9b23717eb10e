"""Settings refuse unsafe security values."""

from __future__ import annotations

import pytest

from notifyhub.settings import Settings

SECRET = "s" * 40


def test_cors_wildcard_is_refused_because_credentials_are_allowed() -> None:
    with pytest.raises(ValueError, match="CORS_ORIGINS"):
        Settings(jwt_secret=SECRET, cors_origins=["*"], _env_file=None)  # type: ignore[arg-type, call-arg]
    with pytest.raises(ValueError, match="CORS_ORIGINS"):
        Settings(jwt_secret=SECRET, cors_origins=["https://a.example", "*"], _env_file=None)  # type: ignore[arg-type, call-arg]


def test_cors_origins_by_name_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFYHUB_CORS_ORIGINS", '["https://app.example"]')
    settings = Settings(jwt_secret=SECRET, _env_file=None)  # type: ignore[arg-type, call-arg]
    assert settings.cors_origins == ["https://app.example"]


def test_rate_limits_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFYHUB_RATE_LIMITS__PER_USER_PER_S", "0")
    monkeypatch.setenv("NOTIFYHUB_RATE_LIMITS__PER_KEY_BURST", "50")
    settings = Settings(jwt_secret=SECRET, _env_file=None)  # type: ignore[arg-type, call-arg]
    assert settings.rate_limits.per_user_per_s == 0
    assert settings.rate_limits.per_key_burst == 50


def test_every_hub_server_caps_request_heads() -> None:
    from fastapi import FastAPI

    from notifyhub.api.protocol import MAX_HEAD_BYTES, HubHttpProtocol
    from notifyhub.process.supervisor import server_config

    settings = Settings(jwt_secret=SECRET, _env_file=None)  # type: ignore[arg-type, call-arg]
    config = server_config(FastAPI(), settings, access_log=False)
    assert config.http is HubHttpProtocol
    assert config.h11_max_incomplete_event_size == MAX_HEAD_BYTES
