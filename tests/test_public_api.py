"""The curated public API: sorted, complete, importable."""

from __future__ import annotations

import engramdb


def test_all_is_sorted_and_unique():
    assert list(engramdb.__all__) == sorted(set(engramdb.__all__), key=lambda n: (not n.isupper(), n))


def test_every_public_name_resolves():
    for name in engramdb.__all__:
        assert getattr(engramdb, name) is not None


def test_errors_subclass_the_matching_builtins():
    assert issubclass(engramdb.NotFound, KeyError)
    assert issubclass(engramdb.ValidationError, ValueError)
    assert issubclass(engramdb.StorageError, engramdb.EngramError)
    assert str(engramdb.NotFound("no memory 'x'")) == "no memory 'x'"


def test_package_ships_type_information():
    from importlib.resources import files

    assert files("engramdb").joinpath("py.typed").is_file()
    assert files("engramdb.embeddings").joinpath("data/vocab.txt").is_file()


def _engramdb_classes(tp: object) -> set[type]:
    """Every engramdb class named in a (possibly generic or union) annotation."""
    import types
    import typing

    found: set[type] = set()
    if isinstance(tp, type) and tp.__module__.startswith("engramdb"):
        found.add(tp)
    origin = typing.get_origin(tp)
    if origin is not None and origin is not typing.Literal:
        for arg in typing.get_args(tp):
            found |= _engramdb_classes(arg)
    if isinstance(tp, types.UnionType):
        for arg in tp.__args__:
            found |= _engramdb_classes(arg)
    return found


def test_every_type_a_public_method_returns_is_exported(mem):
    """Users never import internals to name what the API hands them (facade verbs and every area's methods)."""
    import collections.abc
    import inspect
    import typing

    import engramdb.models

    owners = [mem] + [
        getattr(mem, area)
        for area in (
            "learning",
            "failures",
            "episodes",
            "code",
            "sharing",
            "knowledge",
            "audit",
            "retention",
            "routing",
            "keys",
        )
    ]
    missing: dict[str, str] = {}
    for owner in owners:
        for name, method in inspect.getmembers(type(owner), inspect.isfunction):
            if name.startswith("_"):
                continue
            # Names imported only for type checking resolve against the public models.
            hints = typing.get_type_hints(method, localns={**vars(collections.abc), **vars(engramdb.models)})
            for cls in _engramdb_classes(hints.get("return")):
                if getattr(engramdb, cls.__name__, None) is not cls:
                    missing[cls.__name__] = f"{type(owner).__name__}.{name}"
    assert missing == {}


def test_every_public_model_is_exported():
    import engramdb.models

    private = {"GENESIS", "DEFAULT_RULE", "NO_MERGE_KINDS"}
    assert {n for n in engramdb.models.__all__ if n not in private} <= set(engramdb.__all__)
