"""Seed 003, "Metadata filtering for precise retrieval": ``search``/``list``/``count`` take ``metadata=``, an exact
match on top-level keys and values, as a hard filter on both backends.

The seed's example stores knowledge with ``metadata={"language": "python", "framework": "fastapi"}``; a search
filtered on it must return only what holds those values, however close the other memories are in meaning.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import Engram
from engramdb.errors import ValidationError

OAUTH = "OAuth2 Implementation Pattern: authorization code flow with PKCE and refresh tokens"


def _seed_store(mem: Engram) -> dict[str, str]:
    """The seed's ``add_custom_knowledge(..., metadata={"language": "python", "framework": "fastapi"})``, beside
    near-identical knowledge for other stacks."""
    stacks = {
        "fastapi": {"language": "python", "framework": "fastapi"},
        "flask": {"language": "python", "framework": "flask"},
        "express": {"language": "javascript", "framework": "express"},
        "none": {},
    }
    return {
        name: mem.remember(f"{OAUTH} ({name})", agent="swarm", kind="knowledge", metadata=meta).id
        for name, meta in stacks.items()
    }


def test_the_seeds_metadata_filter_on_both_backends(backend_mem: Engram) -> None:
    """seed 003: ``metadata={"language": "python", "framework": "fastapi"}`` ... "Metadata filtering for precise
    retrieval"."""
    mem = backend_mem
    ids = _seed_store(mem)
    exact = {"language": "python", "framework": "fastapi"}
    assert [h.memory.id for h in mem.search("OAuth2 implementation", agent="swarm", metadata=exact)] == [ids["fastapi"]]
    python = {h.memory.id for h in mem.search("OAuth2 implementation", agent="swarm", metadata={"language": "python"})}
    assert python == {ids["fastapi"], ids["flask"]}
    assert [m.id for m in mem.list(agent="swarm", metadata={"framework": "express"})] == [ids["express"]]
    assert mem.count(agent="swarm", metadata={"language": "python"}) == 2
    assert mem.count(agent="swarm", metadata={"language": "rust"}) == 0
    assert mem.count(agent="swarm", metadata={}) == 4  # an empty filter filters nothing
    # The filter is a hard filter beside the others: another agent sees none of them.
    assert mem.search("OAuth2 implementation", agent="bob", metadata={"language": "python"}) == []


def test_values_match_exactly_by_json_type(backend_mem: Engram) -> None:
    mem = backend_mem
    one = mem.remember("build number one", metadata={"build": 1, "ok": True, "note": None, "tag": "1"}).id
    mem.remember("build number one point five", metadata={"build": 1.5, "ok": False, "tag": 1})
    assert [m.id for m in mem.list(metadata={"build": 1.0})] == [one]  # numbers compare as numbers
    assert mem.list(metadata={"build": True}) == []  # true is not 1
    assert [m.id for m in mem.list(metadata={"ok": True})] == [one]
    assert [m.id for m in mem.list(metadata={"note": None})] == [one]  # null, not a missing key
    assert [m.id for m in mem.list(metadata={"tag": "1"})] == [one]  # "1" is not 1
    assert mem.count(metadata={"tag": 1}) == 1
    assert mem.list(metadata={"missing": None}) == []


@pytest.mark.parametrize(
    ("flt", "message"),
    [
        (["language", "python"], "metadata filter must be a JSON object, not list"),
        ({"language": ["python"]}, "metadata filter value of 'language' must be a string, number, true/false or null"),
        ({"language": {"is": "python"}}, "must be a string, number, true/false or null, not dict"),
        ({"n": float("nan")}, "must be a finite number"),
        ({3: "x"}, "a metadata filter key must be a string, not int"),
        ({"a\x00": "x"}, "contains a NUL character"),
        ({f"k{i}": i for i in range(65)}, "too many keys (65; the limit is 64)"),
    ],
)
def test_a_bad_filter_is_one_clear_error_and_reads_nothing(mem: Engram, flt: Any, message: str) -> None:
    mem.remember("something", metadata={"language": "python"})
    before = mem.audit.log(limit=1000)
    for read in (
        lambda: mem.search("something", metadata=flt),
        lambda: mem.list(metadata=flt),
        lambda: mem.count(metadata=flt),
    ):
        with pytest.raises(ValidationError) as err:
            read()
        assert message in str(err.value)
        assert "\n" not in str(err.value)
    assert mem.audit.log(limit=1000) == before


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 2.5]), st.sampled_from(["a", "b", "1"])
)
KEYS = ["k", "j", "x y", 'q"']
METAS = st.dictionaries(st.sampled_from(KEYS), SCALARS, max_size=3)


def _json_kind(v: Any) -> str:
    return "bool" if isinstance(v, bool) else "num" if isinstance(v, int | float) else type(v).__name__


def _same(a: Any, b: Any) -> bool:
    """JSON equality: a bool is not a number, a number is not a string; numbers compare as numbers."""
    return _json_kind(a) == _json_kind(b) and a == b


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Engram]:
    mem = Engram(tmp_path_factory.mktemp("meta") / "store", embedder=embedder)
    rng = random.Random(7)
    values: list[Any] = [None, True, False, -1, 0, 1, 2, 0.0, 1.0, 2.5, "a", "b", "1"]
    for i in range(40):
        keys = rng.sample(KEYS, rng.randint(0, 3))
        mem.remember(f"deploy note number {i} about the release", metadata={k: rng.choice(values) for k in keys})
    yield mem
    mem.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=METAS)
def test_filtered_reads_are_exactly_the_memories_holding_the_values(varied: Engram, flt: dict[str, Any]) -> None:
    everything = varied.list(limit=1000)
    expected = {m.id for m in everything if all(k in m.metadata and _same(m.metadata[k], v) for k, v in flt.items())}
    assert {m.id for m in varied.list(metadata=flt, limit=1000)} == expected
    assert varied.count(metadata=flt) == len(expected)
    found = {h.memory.id for h in varied.search("release deploy note", metadata=flt, limit=100)}
    assert found <= expected
    assert bool(found) == bool(expected)
