"""`trusted(cls)` builds what `cls.model_construct` builds, for the models it accepts; the
hub's times are written as converting them would write them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import BaseModel, ConfigDict, Field

from notifyhub.domain.notification import Action, Draft, Notification, Severity, to_rfc3339
from notifyhub.domain.trusted import trusted

NOW = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def _same(a: BaseModel, b: BaseModel) -> None:
    assert a == b
    assert list(a.__dict__) == list(b.__dict__)  # the same fields, in the same order
    assert a.model_fields_set == b.model_fields_set
    assert a.model_dump_json() == b.model_dump_json()


@pytest.mark.parametrize(
    "values",
    [
        {"id": "01J", "tenant": "t", "title": "hi", "created_at": NOW, "expires_at": NOW},
        {
            "id": "01K",
            "tenant": "t",
            "title": "hi",
            "body": "b",
            "severity": Severity.ERROR,
            "data": {"k": [1, 2]},
            "tags": ("a", "b"),
            "created_at": NOW,
            "expires_at": NOW + timedelta(days=1),
        },
    ],
)
def test_a_notification_is_the_one_model_construct_builds(values: dict[str, object]) -> None:
    _same(trusted(Notification)(**values), Notification.model_construct(**values))


def test_a_draft_is_the_one_model_construct_builds() -> None:
    values = {"title": "hi", "ttl_s": 60, "actions": (Action(id="ok", label="OK"),)}
    _same(trusted(Draft)(**values), Draft.model_construct(**values))


def test_mutable_defaults_are_never_shared() -> None:
    class Holder(BaseModel):
        listed: list[int] = [1]
        made: dict[str, int] = Field(default_factory=dict)

    new = trusted(Holder)
    first, second = new(), new()
    first.listed.append(2)
    first.made["x"] = 1
    assert (second.listed, second.made) == ([1], {})
    assert Holder.model_construct().listed == [1]


def test_models_it_would_build_differently_are_refused() -> None:
    class Aliased(BaseModel):
        name: str = Field(alias="n")

    class Extra(BaseModel):
        model_config = ConfigDict(extra="allow")

    for cls in (Aliased, Extra):
        with pytest.raises(TypeError):
            trusted(cls)


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 27, 9, 0, 1, 123456, tzinfo=UTC),
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 11, 27, 11, 0, 1, 5000, tzinfo=timezone(timedelta(hours=2))),
    ],
)
def test_times_are_written_in_utc_with_milliseconds_and_a_z(value: datetime) -> None:
    """`to_rfc3339`'s shortcut for the hub's own (UTC) times writes what converting does."""
    written = to_rfc3339(value)
    assert written == value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
