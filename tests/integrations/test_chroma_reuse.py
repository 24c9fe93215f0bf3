"""``import_chroma(reuse_vectors=True)``: a real Chroma store whose vectors come from the store's own model.

The collections are written with the real chromadb package (``PersistentClient``), their embeddings made by
the store's real embedding model, so reuse can be checked end to end: how many texts the model embeds during
the import, and which vectors end up in the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from integration_extras import require
from typer.testing import CliRunner

chromadb = require("chromadb", "chroma")

from chromadb.config import Settings  # noqa: E402

from engramdb import Engram  # noqa: E402
from engramdb.embeddings import CachedEmbedder  # noqa: E402
from engramdb.embeddings.base import Embedder  # noqa: E402
from engramdb.errors import ValidationError  # noqa: E402
from engramdb.integrations.chroma import REUSE_SAMPLE, import_chroma  # noqa: E402
from engramdb.interfaces.cli import app  # noqa: E402

SECRET = "AKIA" + "QWERTYUIOPASDFGH"
DOCS = [f"Note {i}: how to fix error number {i} in the {('parser', 'scheduler', 'cache')[i % 3]}" for i in range(40)]
SECRET_DOC = f"The staging deploy key is {SECRET}; rotate it monthly"


class CountingEmbedder:
    """The real model, counting the texts it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def counting(embedder: Embedder) -> CountingEmbedder:
    assert isinstance(embedder, CachedEmbedder)
    return CountingEmbedder(embedder.inner)


@pytest.fixture
def store(tmp_path: Path, counting: CountingEmbedder) -> Iterator[Engram]:
    with Engram(tmp_path / "store", embedder=CachedEmbedder(counting, size=4096)) as mem:
        yield mem


def make_chroma(path: Path, docs: list[str], vectors: npt.NDArray[np.float32]) -> None:
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    notes = client.get_or_create_collection("notes", embedding_function=None)
    notes.add(ids=[f"n{i}" for i in range(len(docs))], documents=docs, embeddings=vectors.tolist())


def same_model_chroma(tmp_path: Path, embedder: Embedder) -> Path:
    path = tmp_path / "chroma"
    docs = [*DOCS, SECRET_DOC]
    # Chroma keeps float32 vectors; scaled by 3 so the import must normalise them (as a raw model output may be).
    make_chroma(path, docs, 3.0 * embedder.embed(docs))
    return path


def test_reuse_writes_the_collections_vectors_and_embeds_only_the_sample_and_redacted(
    store: Engram, counting: CountingEmbedder, tmp_path: Path, embedder: Embedder
) -> None:
    chroma_dir = same_model_chroma(tmp_path, embedder)
    counting.texts.clear()
    report = import_chroma(store, chroma_dir, agent="surfer", reuse_vectors=True)
    assert report.imported == len(DOCS) + 1
    # Every document stored unchanged used its vector; the redacted one differs from its document.
    assert report.reused == len(DOCS)
    assert report.to_dict()["vectors"] == "reused"
    assert report.collections[0].sample_cosine is not None
    assert report.collections[0].sample_cosine > 0.999
    assert "40 reused, 1 document embedded" in report.vectors_note
    # The model embedded only the sample (the check) and the redacted text.
    assert len(counting.texts) <= REUSE_SAMPLE + 1
    # The secret never reached the model (the sample skips what redaction changes); its redacted text did, once.
    assert not any(SECRET in t for t in counting.texts)
    redacted = [t for t in counting.texts if "deploy key" in t]
    assert len(redacted) == 1
    assert all(t in DOCS for t in counting.texts if t not in redacted)
    # The stored vectors are Chroma's (normalised), row for row.
    memories = {m.metadata["chroma_id"]: m for m in store.list(agent="surfer", limit=100)}
    stored = store.store.vectors.get([m.id for m in memories.values()], model_id=store.embedder.model_id)
    expected = embedder.embed(DOCS)
    for i in range(len(DOCS)):
        got = stored[memories[f"n{i}"].id]
        assert float(np.dot(got, expected[i])) > 0.9999
    # Searching finds them as if they had been embedded here.
    hits = store.search("error number 17 in the cache", agent="surfer", limit=3)
    assert hits
    assert hits[0].memory.metadata["chroma_id"] == "n17"


def test_vectors_of_another_model_are_refused_before_anything_is_written(store: Engram, tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    rng = np.random.default_rng(3)
    make_chroma(path, DOCS, rng.standard_normal((len(DOCS), store.embedder.dim)).astype(np.float32))
    with pytest.raises(ValidationError, match=r"are not .* cosine"):
        import_chroma(store, path, agent="surfer", reuse_vectors=True)
    assert store.count(agent="surfer") == 0
    # Without reuse the same store imports fine (re-embedding).
    assert import_chroma(store, path, agent="surfer").imported == len(DOCS)


def test_vectors_of_another_dimension_are_refused(store: Engram, tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    make_chroma(path, DOCS[:3], np.ones((3, 8), dtype=np.float32))
    with pytest.raises(ValidationError, match="8 dimensions"):
        import_chroma(store, path, agent="surfer", reuse_vectors=True)
    assert store.count(agent="surfer") == 0


def test_dry_run_checks_and_writes_nothing(
    store: Engram, counting: CountingEmbedder, tmp_path: Path, embedder: Embedder
) -> None:
    chroma_dir = same_model_chroma(tmp_path, embedder)
    report = import_chroma(store, chroma_dir, agent="surfer", reuse_vectors=True, dry_run=True)
    assert report.imported == len(DOCS) + 1
    assert report.reused == 0
    assert "would be reused" in report.vectors_note
    assert store.count(agent="surfer") == 0


def test_bad_tolerance_and_an_uncached_embedder_are_validation_errors(
    tmp_path: Path, counting: CountingEmbedder, embedder: Embedder
) -> None:
    chroma_dir = same_model_chroma(tmp_path, embedder)
    with Engram(tmp_path / "plain", embedder=counting) as plain:
        with pytest.raises(ValidationError, match="embedder cache"):
            import_chroma(plain, chroma_dir, reuse_vectors=True)
        with pytest.raises(ValidationError, match="tolerance"):
            import_chroma(plain, chroma_dir, reuse_vectors=True, tolerance=1.5)


def test_cli_reuse_vectors(tmp_path: Path, embedder: Embedder) -> None:
    chroma_dir = same_model_chroma(tmp_path, embedder)
    other = tmp_path / "other"
    make_chroma(other, DOCS[:3], np.ones((3, 8), dtype=np.float32))
    runner = CliRunner()
    store = str(tmp_path / "cli-store")
    # The whole `engram` app: `engram import chroma PATH --reuse-vectors`.
    real = runner.invoke(
        app, ["import", "chroma", str(chroma_dir), "--reuse-vectors", "-a", "surfer", "--store", store]
    )
    assert real.exit_code == 0, real.output
    assert "40 reused, 1 document embedded" in " ".join(real.stdout.split())
    bad = runner.invoke(app, ["import", "chroma", str(other), "--reuse-vectors", "--store", str(tmp_path / "s2")])
    # A user error: exit 1 and one line on stderr, no traceback.
    assert bad.exit_code == 1, bad.output
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    assert "8 dimensions" in lines[0]
