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
import operator
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar

__all__ = ["Encoded", "encode"]


#: Types returned as they are. They and the built-in containers are told by their exact type first, which
#: is much cheaper than the tests below (a search's hits are encoded value by value); none has a to_dict.
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def encode(value: object) -> Any:
    """``value`` made JSON-ready by the rule above."""
    if type(value) in _PLAIN:
        return value
    if type(value) is datetime:
        return value.isoformat()
    if type(value) is tuple or type(value) is list:
        return [encode(v) for v in value]
    if type(value) is dict:
        return {k: encode(v) for k, v in value.items()}
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
        keys, values = _readers(type(self))
        plain = _PLAIN
        return {k: v if type(v) in plain else encode(v) for k, v in zip(keys, values(self), strict=True)}


#: Per class, its keys and one getter reading them all, made once (to_dict runs for every value a server returns).
_READERS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}


def _readers(cls: type[Encoded]) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    found = _READERS.get(cls)
    if found is None:
        keys = cls._keys
        if keys is None:
            keys = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]  # every subclass is a dataclass
        getter = operator.attrgetter(*keys)
        # attrgetter of one name returns the value itself, not a 1-tuple.
        values = getter if len(keys) > 1 else (lambda obj: (getter(obj),))
        found = _READERS[cls] = (keys, values)
    return found
