"""Models built from values that are valid already, cheaper than `model_construct`.

A publish builds two models from fields validated once at the edge: its `Draft` (from
the request) and its `Notification` (from the draft). pydantic's `model_construct` looks
every field up under its aliases and deep-copies every default, a noticeable part of a
publish (docs/scaling.md, "Design notes"). `trusted(cls)` returns a constructor that
sets the same `__dict__` (fields in declaration order, the defaults for those not given)
and the same fields-set as `model_construct`, for models where both agree by
construction: no aliases, no `model_post_init`, extra fields not allowed (checked when
the constructor is made).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

M = TypeVar("M", bound=BaseModel)
_set = object.__setattr__
_IMMUTABLE = (str, bytes, int, float, bool, type(None), Enum, frozenset)


def _immutable(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_immutable(v) for v in value)
    return isinstance(value, _IMMUTABLE)


def trusted(cls: type[M]) -> Callable[..., M]:
    """A constructor of `cls` from trusted values, as `cls.model_construct(**values)`."""
    fields = cls.__pydantic_fields__
    static, made = _defaults(cls)
    order = tuple(fields)

    def construct(**values: Any) -> M:
        model = cls.__new__(cls)
        state: dict[str, Any] = {}
        for name in order:
            if name in values:
                state[name] = values[name]
            elif name in static:
                state[name] = static[name]
            elif name in made:
                state[name] = made[name]()
        _set(model, "__dict__", state)
        _set(model, "__pydantic_fields_set__", set(values) & fields.keys())
        _set(model, "__pydantic_extra__", None)
        _set(model, "__pydantic_private__", None)
        return model

    return construct


def _defaults(cls: type[BaseModel]) -> tuple[dict[str, Any], dict[str, Callable[[], Any]]]:
    """`cls`'s immutable defaults, and how to make the others (a fresh one per model, as
    pydantic does); refuses a model `construct` would build differently."""
    if cls.__pydantic_post_init__ or cls.model_config.get("extra") == "allow":
        raise TypeError(f"{cls.__name__}: model_post_init or extra fields")
    static: dict[str, Any] = {}
    made: dict[str, Callable[[], Any]] = {}
    for name, field in cls.__pydantic_fields__.items():
        if field.alias is not None or field.validation_alias is not None:
            raise TypeError(f"{cls.__name__}.{name}: aliases")
        if field.default_factory is not None:
            if field.default_factory_takes_validated_data:
                raise TypeError(f"{cls.__name__}.{name}: a default factory taking data")
            made[name] = field.default_factory  # type: ignore[assignment]
        elif field.default is not PydanticUndefined:
            default = field.default
            if _immutable(default):
                static[name] = default
            else:
                made[name] = functools.partial(copy.deepcopy, default)
    return static, made
