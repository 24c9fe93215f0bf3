"""The static embedder distilled from the bundled model: real derivation, real table file, real engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engramdb import Engram
from engramdb.config import load_settings
from engramdb.embeddings import CachedEmbedder, Embedder, make_embedder
from engramdb.embeddings.local import DEFAULT_MODEL_ID
from engramdb.embeddings.static import StaticEmbedder
from engramdb.errors import ConfigError, EmbeddingError, ValidationError


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An engram home whose ``embeddings`` folder holds the real 256-d table, derived once for the module."""
    path = tmp_path_factory.mktemp("static-home")
    embedder = StaticEmbedder(cache_dir=path / "embeddings")
    embedder.load()
    assert embedder.derive_seconds is not None  # it was derived, not found
    assert embedder.table_path.is_file()
    return path


@pytest.fixture
def static(home: Path) -> StaticEmbedder:
    embedder = StaticEmbedder(cache_dir=home / "embeddings")
    embedder.load()
    return embedder


def _table(embedder: StaticEmbedder) -> npt.NDArray[np.float32]:
    table = embedder._table
    assert table is not None
    return table


def test_vectors_are_unit_norm_and_deterministic(static: StaticEmbedder, home: Path) -> None:
    assert static.derive_seconds is None  # read from the file the fixture wrote
    texts = ["I adopted a rescue dog last spring.", "Où est la gare ?", "", "   ", "🙂🙂", "x" * 5000]
    vectors = static.embed(texts)
    assert vectors.shape == (len(texts), 256)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    # Same text, same vector: across calls, batch compositions and a fresh embedder reading the file.
    again = StaticEmbedder(cache_dir=home / "embeddings").embed(list(reversed(texts)))[::-1]
    np.testing.assert_array_equal(vectors, again)
    np.testing.assert_array_equal(vectors[:1], static.embed(texts[:1]))
    assert static.embed([]).shape == (0, 256)


def test_similar_texts_are_closer_than_unrelated_ones(static: StaticEmbedder) -> None:
    anchor, near, far = static.embed(
        [
            "My dog loves playing fetch in the park every morning.",
            "Every morning I take the puppy to the park to chase a ball.",
            "The quarterly tax return for the company is due at the end of March.",
        ]
    )
    assert float(anchor @ near) > float(anchor @ far) + 0.1


def test_model_id_and_dimension_are_its_own(static: StaticEmbedder, home: Path) -> None:
    assert static.model_id != DEFAULT_MODEL_ID
    assert static.model_id.startswith(DEFAULT_MODEL_ID)
    assert "static256" in static.model_id
    assert isinstance(static, Embedder)
    wide = StaticEmbedder(dims=384, cache_dir=home / "embeddings")
    assert wide.model_id != static.model_id
    assert wide.dim == 384
    assert wide.table_path != static.table_path  # never read as the other's table


def test_bad_input_raises_engramdb_errors(static: StaticEmbedder, tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        static.embed("a bare string")
    with pytest.raises(ValidationError):
        static.embed(["fine", 3])  # type: ignore[list-item]
    for dims in (0, 4, 385):
        with pytest.raises(ConfigError):
            StaticEmbedder(dims=dims, cache_dir=tmp_path)
    with pytest.raises(ConfigError):
        StaticEmbedder(sha256="not a hash", cache_dir=tmp_path)


def test_damaged_or_stale_tables_are_rebuilt(
    static: StaticEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = static.table_path.read_bytes()
    reference = static.embed(["the table is validated before use"])
    cache = tmp_path / "embeddings"
    cache.mkdir()
    derived: list[int] = []

    def fake_derive(self: StaticEmbedder, vocab: dict[str, int]) -> npt.NDArray[np.float32]:
        # The real derivation runs once, in the module fixture; here only the check-and-rebuild path is new.
        derived.append(len(vocab))
        return _table(static)

    monkeypatch.setattr(StaticEmbedder, "_derive", fake_derive)
    target = cache / static.table_path.name
    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 0xFF  # a bit flip inside the table's bytes
    for damaged in (b"", good[: len(good) // 2], bytes(flipped), b"not a zip file at all"):
        target.write_bytes(damaged)
        embedder = StaticEmbedder(cache_dir=cache)
        np.testing.assert_allclose(embedder.embed(["the table is validated before use"]), reference, atol=1e-6)
        # Rewritten whole: the next reader takes it as it is.
        assert StaticEmbedder(cache_dir=cache)._read(len(_table(static))) is not None
    assert len(derived) == 4

    # A well-formed table made for another model (its meta says so) is not trusted either.
    with np.load(target, allow_pickle=False) as data:
        meta, table = json.loads(str(data["meta"])), np.asarray(data["table"])
    meta["model_sha256"] = "0" * 64
    with target.open("wb") as fh:
        np.savez(fh, table=table, meta=np.array(json.dumps(meta)))
    StaticEmbedder(cache_dir=cache).load()
    assert len(derived) == 5
    assert not list(cache.glob("*.tmp"))


def test_an_unwritable_cache_dir_is_an_embedding_error(
    static: StaticEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(StaticEmbedder, "_derive", lambda self, vocab: _table(static))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    with pytest.raises(EmbeddingError, match="cannot write the static embedding table"):
        StaticEmbedder(cache_dir=blocker / "embeddings").embed(["anything"])


def test_selectable_through_settings_and_the_engine(home: Path) -> None:
    settings = load_settings({}, home=str(home), embedder="static", embed_cache_size=16)
    embedder = make_embedder(settings)
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, StaticEmbedder)
    assert embedder.inner.table_path.parent == home / "embeddings"
    assert embedder.dim == 256
    assert isinstance(make_embedder(settings.replace(embedder="static:384")).inner, StaticEmbedder)
    with pytest.raises(ConfigError):
        make_embedder(settings.replace(embedder="static:wide"))

    with Engram(":memory:", home=str(home), embedder="static") as mem:
        assert mem.embedder.model_id == embedder.model_id
        mem.remember("Caroline went to an LGBTQ support group on Tuesday.", kind="conversation")
        mem.remember("Melanie painted a sunrise over the lake last week.", kind="conversation")
        mem.flush()
        hits = mem.search("Which meeting did Caroline attend?", limit=1)
        assert "support group" in hits[0].memory.content
