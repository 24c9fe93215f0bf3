"""Every public model's ``to_dict`` gives what it gave before the one encoder (models/_encode.py), byte for byte.

``tests/data/model_dicts.json`` holds, per public model, outputs of the hand-written ``to_dict`` methods
recorded before any was replaced (values drawn by Hypothesis from the models' types, kept where
``from_dict`` rebuilds the value exactly). Each is rebuilt here and encoded again.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engramdb.models as models
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


@pytest.mark.parametrize("name", ENCODED)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_encoded_values_are_json_with_every_field(name: str, data: st.DataObject) -> None:
    cls = getattr(models, name)
    out = data.draw(st.from_type(cls)).to_dict()
    text = json.dumps(out)  # JSON-ready: nothing but dicts, lists, strings, numbers, booleans and None
    assert json.dumps(json.loads(text)) == text
    assert [f.name for f in dataclasses.fields(cls) if f.name not in out] == []


def test_encode_rules() -> None:
    from datetime import UTC, datetime

    at = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    assert encode({"a": (1, at), "b": [None, "x"]}) == {"a": [1, "2026-11-27T12:00:00+00:00"], "b": [None, "x"]}
    check = models.HealthCheck(name="database", ok=True, detail="fine")
    assert encode([check]) == [check.to_dict()]
