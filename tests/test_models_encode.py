"""Every public model's ``to_dict`` gives what it gave before the one encoder (models/_encode.py), byte for byte.

``tests/data/model_dicts.json`` holds, per public model, outputs of the hand-written ``to_dict`` methods
recorded before any was replaced (values drawn by Hypothesis from the models' types, kept where
``from_dict`` rebuilds the value exactly). Each is rebuilt here and encoded again.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import engramdb.models as models
from engramdb.errors import EngramError
from engramdb.models._decode import from_dict
from engramdb.models._encode import Encoded, encode

GOLDEN: dict[str, list[dict[str, Any]]] = json.loads(
    (Path(__file__).parent / "data" / "model_dicts.json").read_text(encoding="utf-8")
)
ENCODED = sorted(
    n for n in models.__all__ if isinstance(getattr(models, n), type) and issubclass(getattr(models, n), Encoded)
)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_to_dict_is_unchanged(name: str) -> None:
    cls = getattr(models, name)
    for old in GOLDEN[name]:
        assert json.dumps(from_dict(cls, old).to_dict()) == json.dumps(old)


def test_every_encoded_model_is_checked_against_its_old_output() -> None:
    assert ENCODED, "no model uses the encoder"
    assert [n for n in ENCODED if not GOLDEN.get(n)] == []


#: What a field typed ``Any`` holds in a public value: JSON (metadata, details, an event's data).
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _values(tp: Any) -> st.SearchStrategy[Any]:
    """Values of ``tp`` as st.from_type draws them, but JSON where ``Any`` stands, and models that accept them."""
    if tp is Any:
        return _JSON
    origin, args = get_origin(tp), get_args(tp)
    if origin in (types.UnionType, Union):
        return st.one_of(*map(_values, args))
    if dataclasses.is_dataclass(tp):
        hints = get_type_hints(tp)
        fields = {f.name: _values(hints[f.name]) for f in dataclasses.fields(tp) if f.init and f.name != "count_tokens"}
        return st.fixed_dictionaries(fields).map(lambda kw: _made(tp, kw)).filter(lambda v: v is not None)
    if origin in (dict, Mapping):
        return st.dictionaries(_values(args[0]), _values(args[1]), max_size=3)
    if origin in (list, Sequence):
        return st.lists(_values(args[0]), max_size=3)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(_values(args[0]), max_size=3).map(tuple)
    if origin is tuple:
        return st.tuples(*map(_values, args))
    return st.from_type(tp)


def _made(cls: Any, kw: dict[str, Any]) -> Any:
    try:
        return cls(**kw)
    except EngramError:  # a model's own checks refused the draw (ModelSpec's name, a retention rule's limits)
        return None


@pytest.mark.parametrize("name", ENCODED)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data())
def test_encoded_values_are_json_with_every_field(name: str, data: st.DataObject) -> None:
    cls = getattr(models, name)
    out = data.draw(_values(cls)).to_dict()
    text = json.dumps(out)  # JSON-ready: nothing but dicts, lists, strings, numbers, booleans and None
    assert json.dumps(json.loads(text)) == text
    assert [f.name for f in dataclasses.fields(cls) if f.name not in out] == []


def test_encode_rules() -> None:
    from datetime import UTC, datetime

    at = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    assert encode({"a": (1, at), "b": [None, "x"]}) == {"a": [1, "2026-11-27T12:00:00+00:00"], "b": [None, "x"]}
    check = models.HealthCheck(name="database", ok=True, detail="fine")
    assert encode([check]) == [check.to_dict()]


PUBLIC = sorted(n for n in models.__all__ if callable(getattr(getattr(models, n), "to_dict", None)))
#: Keys a rebuilt value writes differently, with the reason: a context's prompt is rendered again with the token
#: counter of the process that rebuilt it (the server's tokenizer is not in the JSON).
_RENDERED = {"Context": ("prompt", "prompt_tokens")}


@pytest.mark.parametrize("name", PUBLIC)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data())
def test_json_survives_from_dict(name: str, data: st.DataObject) -> None:
    """What the remote client rebuilds from a value's JSON writes that JSON again (renamed or reshaped fields too)."""
    cls = getattr(models, name)
    value = data.draw(_values(cls))
    try:
        out = json.loads(json.dumps(value.to_dict()))
    except EngramError:  # a value its own rules refuse to write (a context's negative token budget)
        assume(False)
    again = from_dict(cls, out).to_dict()
    for key in _RENDERED.get(name, ()):
        out.pop(key), again.pop(key)
    assert json.dumps(again) == json.dumps(out)
