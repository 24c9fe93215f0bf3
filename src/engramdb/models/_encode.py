"""``to_dict``: one encoder for the values whose JSON only copies their fields.

A value class inherits :class:`Encoded` and gets ``to_dict()``: its dataclass fields in declaration
order (or the names in its ``_keys``, which may also name properties, e.g. a derived ``ok``), each
encoded by one rule: a nested value by its own ``to_dict()``, a datetime as ISO 8601, an enum by its
value, lists and tuples as lists, mappings with encoded values; anything else as it is. Values whose
JSON says more than that (conditional keys, renamed fields, pairs spelled as objects) keep a
hand-written ``to_dict``. ``tests/test_models_encode.py`` holds the outputs of the hand-written
methods this replaced and checks they are unchanged, byte for byte.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

__all__ = ["Encoded", "encode"]


def encode(value: object) -> Any:
    """``value`` made JSON-ready by the rule above."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return to_dict()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    return value


class Encoded:
    """Mixin of a frozen dataclass of :mod:`engramdb.models`: ``to_dict()`` by :func:`encode`."""

    __slots__ = ()

    #: The keys of ``to_dict()`` in order, when not the fields in declaration order.
    _keys: ClassVar[tuple[str, ...] | None] = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        keys = self._keys if self._keys is not None else _fields(type(self))
        return {k: encode(getattr(self, k)) for k in keys}


#: Field names per class, read once (to_dict runs for every value a server returns).
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names
