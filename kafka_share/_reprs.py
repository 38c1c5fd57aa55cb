"""One ``__repr__`` for the package's attrs classes, instead of one compiled per class.

attrs writes and compiles a ``__repr__`` for every class it makes, at import:
about 0.13 ms a class, 8 ms of a consumer's start-up over the 58 classes it
creates (11 % of importing the package and constructing a consumer). These
classes are made with ``repr=False`` and take :func:`attrs_repr`, whose repr
reads the fields when it is called and prints what attrs' would:
``Name(field=value, ...)``, leaving out fields declared ``repr=False`` and
applying a field's own repr callable.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

__all__ = ["attrs_repr"]

_C = TypeVar("_C", bound=type)


def attrs_repr(cls: _C) -> _C:
    """Class decorator, above ``@attrs.frozen(repr=False)`` or
    ``@attrs.define(repr=False)``: give ``cls`` attrs' repr, unless it has its own."""
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = _fields_repr  # type: ignore[assignment]
    return cls


def _fields_repr(self: object) -> str:
    cls: Any = type(self)  # an attrs class: attrs_repr is only put on those
    parts = []
    for field in attrs.fields(cls):
        shown = field.repr
        if shown is False:
            continue
        value = getattr(self, field.name, attrs.NOTHING)
        parts.append(f"{field.name}={shown(value) if callable(shown) else repr(value)}")
    return f"{cls.__qualname__.rsplit('>.', 1)[-1]}({', '.join(parts)})"
