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
