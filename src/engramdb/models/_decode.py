"""``from_dict``: a public value rebuilt from its ``to_dict()`` JSON (what the remote client receives).

One generic rule instead of a ``from_dict`` per class: the dataclass's fields are read
from the dict by name and converted by their annotated type (ISO 8601 strings back to
datetimes, lists back to tuples, nested values recursively). Keys that are not fields
(derived ones such as ``success_rate`` or a context's ``prompt``) are ignored; a missing
field takes its default. Anything that does not fit is a :class:`ValidationError`, so a
client talking to the wrong server fails with one clear line. A value whose hand-written
``to_dict`` renames or reshapes its fields says how to read them back in a static method
``_json_fields`` (data in, fields out), next to that ``to_dict``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar, get_args, get_origin

from engramdb.errors import ValidationError

__all__ = ["from_dict", "object_pairs"]

T = TypeVar("T")


def from_dict(cls: type[T], data: object) -> T:
    """``cls`` (a dataclass of :mod:`engramdb.models`) rebuilt from ``data``, the JSON of its ``to_dict()``."""
    return typing.cast("T", _value(cls, data, cls.__name__))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def object_pairs(value: object, first: str) -> object:
    """``[{first: a, "count": n}, ...]``, how a ``to_dict`` spells pairs, as ``[[a, n], ...]`` again.

    Anything else is returned as it is, for the field's type to refuse.
    """
    if isinstance(value, list) and all(isinstance(v, Mapping) and set(v) == {first, "count"} for v in value):
        return [[v[first], v["count"]] for v in value]
    return value


def _dataclass(cls: type, data: object, where: str) -> object:
    if not isinstance(data, Mapping):
        raise ValidationError(f"{where}: expected an object, got {type(data).__name__}")
    reshape = getattr(cls, "_json_fields", None)
    fields: Mapping[str, Any] = data if reshape is None else reshape(data)
    hints = _hints(cls)
    values: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name not in fields:
            continue
        values[f.name] = _value(hints[f.name], fields[f.name], f"{where}.{f.name}")
    try:
        return cls(**values)
    except TypeError as exc:  # a required field missing
        raise ValidationError(f"{where}: {exc}") from exc


def _value(tp: Any, data: object, where: str) -> object:
    origin = get_origin(tp)
    if tp is Any or tp is object:
        return data
    if origin in (types.UnionType, typing.Union):
        args = get_args(tp)
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _value(arg, data, where)
            except ValidationError as exc:
                errors.append(str(exc))
        raise ValidationError(errors[0] if errors else f"{where}: unexpected null")
    if origin is Literal:
        if data not in get_args(tp):
            raise ValidationError(f"{where}: {data!r} is not one of {get_args(tp)}")
        return data
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp, data, where)
    if tp is datetime:
        if not isinstance(data, str):
            raise ValidationError(f"{where}: expected an ISO 8601 time, got {type(data).__name__}")
        try:
            return datetime.fromisoformat(data)
        except ValueError as exc:
            raise ValidationError(f"{where}: {exc}") from exc
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise ValidationError(f"{where}: expected a number, got {type(data).__name__}")
        return float(data)
    if tp in (int, str, bool):
        if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
            raise ValidationError(f"{where}: expected {tp.__name__}, got {type(data).__name__}")
        return data
    if origin in (tuple, list, Sequence) or tp in (tuple, list):
        if not isinstance(data, list | tuple):
            raise ValidationError(f"{where}: expected a list, got {type(data).__name__}")
        args = get_args(tp)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(data):
                raise ValidationError(f"{where}: expected {len(args)} items, got {len(data)}")
            return tuple(_value(a, d, f"{where}[{i}]") for i, (a, d) in enumerate(zip(args, data, strict=True)))
        item = args[0] if args else Any
        items = [_value(item, d, f"{where}[{i}]") for i, d in enumerate(data)]
        return items if origin is list or tp is list else tuple(items)
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        if not isinstance(data, Mapping):
            raise ValidationError(f"{where}: expected an object, got {type(data).__name__}")
        args = get_args(tp)
        value = args[1] if len(args) == 2 else Any
        return {str(k): _value(value, v, f"{where}.{k}") for k, v in data.items()}
    return data  # callables and other non-JSON fields keep what was sent (never sent: their defaults apply)
