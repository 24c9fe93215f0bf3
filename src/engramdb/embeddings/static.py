"""A static embedder distilled from the bundled model: a token table and a weighted mean, no network, no torch.

The table is derived from the bundled all-MiniLM-L6-v2 int8 ONNX model the way model2vec distils a
sentence encoder (Tulkens and van Dongen, 2024), with no training and no data:

1. every WordPiece token of the model's vocabulary goes through the model alone, as ``[SEP] token [CLS]``
   (model2vec's order, which it found better than ``[CLS] token [SEP]``; better here too, by 1-4 points of
   recall on the dev sets, see bench/RESULTS.md), and its vector is the mean of the three output positions;
2. the vectors are centred and rotated onto their principal components, keeping the first ``dims``
   (PCA; centring removes the direction every token shares, which otherwise dominates the cosine);
3. each token's vector is scaled by the SIF weight ``a / (a + p)`` with ``a = 1e-4`` and ``p`` a Zipf
   estimate of its frequency from its rank in the vocabulary (BERT's vocabulary is roughly in frequency
   order), so frequent words count for less.

A text's vector is then the L2-normalised mean of its tokens' rows (no truncation: a long text costs a
few more table look-ups). Thousands of texts per second on one core, against ~100 for the model.

The table is not shipped: it is derived on first use (46 s on two lightly loaded cores) and cached in
``<cache_dir>/static-<model sha256 prefix>-d<dims>-v<recipe>.npz`` (``make_embedder`` uses
``<engram home>/embeddings``), written atomically with the sha256 of its content; a damaged or foreign file
is rebuilt. The vectors are another model's: the model id says so, and a store written with ``local``
needs ``reembed`` to switch.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import tempfile
import threading
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from engramdb.embeddings._common import check_texts, normalise, one_line
from engramdb.embeddings.local import DIM, LocalEmbedder, build_tokenizer, verify_sha256
from engramdb.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["DEFAULT_STATIC_DIMS", "RECIPE_VERSION", "StaticEmbedder", "derive_table", "distil", "token_vectors"]

log = logging.getLogger(__name__)

#: model2vec's default output size: measured on the dev sets against 128 and 384 (bench/RESULTS.md).
DEFAULT_STATIC_DIMS: Final = 256
#: Bumped whenever the derivation changes, so an old cached table is never read as a new one.
RECIPE_VERSION: Final = 1
#: SIF's ``a``: model2vec's default (1e-3 and 3e-5 measured no better on the dev sets).
_SIF: Final = 1e-4
#: Sequences per model run while deriving: three tokens each, so a batch is small.
_DERIVE_BATCH: Final = 1024
_MIN_DIMS: Final = 8
#: Up to this many tokens in one call, rows are gathered and summed directly (see ``embed``).
_GATHER_TOKENS: Final = 2048


def token_vectors(
    session: Any,
    vocab: dict[str, int],
    *,
    wrap: tuple[str, str] = ("[SEP]", "[CLS]"),
    positions: tuple[int, ...] = (0, 1, 2),
) -> npt.NDArray[np.float32]:
    """Each vocabulary token run through the model alone, between ``wrap``; the mean of ``positions``' outputs.

    One row per token id, the model's width. ``session`` is an onnxruntime session of a BERT-style encoder
    taking ``input_ids``, ``attention_mask`` (and ``token_type_ids`` if it declares it) and returning
    ``last_hidden_state``.
    """
    size = len(vocab)
    first, last = vocab[wrap[0]], vocab[wrap[1]]
    wants_types = "token_type_ids" in {i.name for i in session.get_inputs()}
    picked = list(positions)
    raw: npt.NDArray[np.float32] | None = None
    for start in range(0, size, _DERIVE_BATCH):
        ids = np.arange(start, min(start + _DERIVE_BATCH, size), dtype=np.int64)
        seqs = np.stack([np.full_like(ids, first), ids, np.full_like(ids, last)], axis=1)
        feeds = {"input_ids": seqs, "attention_mask": np.ones_like(seqs)}
        if wants_types:
            feeds["token_type_ids"] = np.zeros_like(seqs)
        try:
            (hidden,) = session.run(["last_hidden_state"], feeds)
        except Exception as exc:
            msg = f"the embedding model failed while deriving the static table: {one_line(exc)}"
            raise EmbeddingError(msg) from exc
        if raw is None:
            raw = np.empty((size, hidden.shape[-1]), dtype=np.float32)
        raw[start : start + len(ids)] = hidden[:, picked].astype(np.float32, copy=False).mean(axis=1)
    assert raw is not None  # a vocabulary always has its special tokens
    return raw


def distil(
    raw: npt.NDArray[np.float32], vocab: dict[str, int], *, dims: int | None, sif: float | None = _SIF
) -> npt.NDArray[np.float32]:
    """Token vectors to a static table: centre and PCA to ``dims`` (None: neither), then SIF-weight by Zipf rank.

    ``sif`` None leaves the weights out. Rows of tokens the tokenizer never produces ([PAD], [unusedN])
    are zero and take no part in the statistics.
    """
    size = len(vocab)
    if dims is not None and dims > raw.shape[1]:
        raise ConfigError(f"static dims must be at most the model's width {raw.shape[1]}, not {dims}")
    real = np.ones(size, dtype=bool)
    for piece, i in vocab.items():
        if piece == "[PAD]" or piece.startswith("[unused"):
            real[i] = False
    table = raw.astype(np.float64)
    if dims is not None:
        centred = table - table[real].mean(axis=0)
        cov = centred[real].T @ centred[real] / int(real.sum())
        _, vectors = np.linalg.eigh(cov)  # ascending eigenvalues
        components = vectors[:, ::-1][:, :dims]
        # An eigenvector's sign is arbitrary: fix it (largest loading positive) so the table is reproducible.
        signs = np.sign(components[np.abs(components).argmax(axis=0), np.arange(dims)])
        table = centred @ (components * signs)
    if sif is not None:
        inv_rank = 1.0 / np.arange(2, size + 2, dtype=np.float64)
        table *= (sif / (sif + inv_rank / inv_rank.sum()))[:, None]
    table[~real] = 0.0
    result: npt.NDArray[np.float32] = table.astype(np.float32)
    return result


def derive_table(session: Any, vocab: dict[str, int], dims: int) -> npt.NDArray[np.float32]:
    """The static table of the model behind ``session``: one row per token id, ``dims`` wide (see module doc)."""
    return distil(token_vectors(session, vocab), vocab, dims=dims)


def _digest(table: npt.NDArray[Any]) -> str:
    return hashlib.sha256(np.ascontiguousarray(table).tobytes()).hexdigest()


class StaticEmbedder:
    """Static token vectors distilled from the bundled MiniLM (see the module doc): fast, ~model2vec quality.

    ``dims`` (default 256) is the table's width after PCA. ``cache_dir`` is where the derived table is kept
    (default: ``~/.engram/embeddings``); ``model_path``/``sha256`` name the ONNX model to derive it from, as
    for :class:`~engramdb.embeddings.local.LocalEmbedder`. Construction is free; the first :meth:`embed`
    (or :meth:`load`) reads the table, deriving and writing it first if it is missing or damaged.
    Thread-safe.
    """

    model_id: str
    dim: int

    def __init__(
        self,
        *,
        dims: int = DEFAULT_STATIC_DIMS,
        cache_dir: str | os.PathLike[str] | None = None,
        model_path: str | os.PathLike[str] | None = None,
        sha256: str | None = None,
    ) -> None:
        if not isinstance(dims, int) or not _MIN_DIMS <= dims <= DIM:
            raise ConfigError(f"static dims must be within [{_MIN_DIMS}, {DIM}], not {dims!r}")
        # The teacher: its checks (hash format, path) and its model id are reused; it is never run to embed.
        self._teacher = LocalEmbedder(model_path, sha256=sha256)
        base = self._teacher.model_id
        self.model_id = f"{base}-static{dims}-v{RECIPE_VERSION}"
        self.dim = dims
        if cache_dir is None:
            from engramdb.config import default_home

            cache_dir = default_home() / "embeddings"
        self.cache_dir = Path(cache_dir).expanduser()
        self.table_path = self.cache_dir / f"static-{self._teacher.sha256[:16]}-d{dims}-v{RECIPE_VERSION}.npz"
        self._lock = threading.Lock()
        self._table: npt.NDArray[np.float32] | None = None
        self._tokenizer: Tokenizer | None = None
        self._fallback = 0
        #: Seconds the last derivation took (None: the table was read from disk).
        self.derive_seconds: float | None = None

    def __repr__(self) -> str:
        return f"StaticEmbedder(model_id={self.model_id!r}, table_path={str(self.table_path)!r})"

    # -- the table ---------------------------------------------------------------------------------
    def load(self) -> None:
        """Read (or derive and write) the table now; otherwise it happens on the first :meth:`embed`."""
        self._ensure_loaded()

    def _ensure_loaded(self) -> tuple[npt.NDArray[np.float32], Tokenizer]:
        table, tokenizer = self._table, self._tokenizer
        if table is not None and tokenizer is not None:
            return table, tokenizer
        with self._lock:
            if self._table is None or self._tokenizer is None:
                tokenizer = build_tokenizer(max_tokens=None)
                vocab: dict[str, int] = tokenizer.get_vocab()
                table = self._read(len(vocab))
                if table is None:
                    table = self._derive(vocab)
                    self._write(table)
                self._fallback = vocab["[UNK]"]
                self._table, self._tokenizer = table, tokenizer
            return self._table, self._tokenizer

    def _meta(self, vocab_size: int) -> dict[str, Any]:
        return {
            "recipe": RECIPE_VERSION,
            "model_sha256": self._teacher.sha256,
            "dims": self.dim,
            "vocab_size": vocab_size,
        }

    def _read(self, vocab_size: int) -> npt.NDArray[np.float32] | None:
        """The cached table if it is there, whole and made for this model and recipe; else None."""
        try:
            with np.load(self.table_path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                table = np.asarray(data["table"])
        except FileNotFoundError:
            return None
        except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            log.warning("static embedding table %s is unreadable (%s): deriving it again", self.table_path, exc)
            return None
        if not isinstance(meta, dict):
            log.warning("static embedding table %s has no valid header: deriving it again", self.table_path)
            return None
        expected = {**self._meta(vocab_size), "sha256": meta.get("sha256")}
        if (
            meta != expected
            or table.dtype != np.float16
            or table.shape != (vocab_size, self.dim)
            or _digest(table) != meta.get("sha256")
        ):
            log.warning("static embedding table %s is damaged or stale: deriving it again", self.table_path)
            return None
        return table.astype(np.float32)

    def _derive(self, vocab: dict[str, int]) -> npt.NDArray[np.float32]:
        import onnxruntime as ort

        verify_sha256(self._teacher.model_path, self._teacher.sha256)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._teacher.threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        log.info("deriving the static embedding table from %s (once; under a minute idle)", self._teacher.model_path)
        started = time.perf_counter()
        try:
            session = ort.InferenceSession(str(self._teacher.model_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingError(f"cannot load embedding model {self._teacher.model_path}: {one_line(exc)}") from exc
        # Stored as float16 (half the disk, cosine unchanged to ~1e-3); used as float32.
        table = derive_table(session, vocab, self.dim).astype(np.float16)
        self.derive_seconds = time.perf_counter() - started
        return table.astype(np.float32)

    def _write(self, table: npt.NDArray[np.float32]) -> None:
        half = table.astype(np.float16)
        meta = {**self._meta(len(table)), "sha256": _digest(half)}
        buffer = io.BytesIO()
        np.savez(buffer, table=half, meta=np.array(json.dumps(meta, sort_keys=True)))
        tmp: str | None = None
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            # Written beside the target then renamed: a reader never sees half a file, and two processes
            # deriving at once each replace the file with a whole, identical-in-meaning table.
            fd, tmp = tempfile.mkstemp(prefix=self.table_path.name, suffix=".tmp", dir=self.cache_dir)
            with os.fdopen(fd, "wb") as fh:
                fh.write(buffer.getvalue())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.table_path)
            tmp = None
        except OSError as exc:
            raise EmbeddingError(
                f"cannot write the static embedding table to {self.table_path}: {exc.strerror or exc}; "
                "make the directory writable or pass another cache_dir"
            ) from exc
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    # -- embedding ---------------------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: shape (len(texts), dim), float32, each row of unit length.

        A text with no tokens (empty, or only whitespace) embeds as the unknown token does.
        """
        items = check_texts(texts)
        if not items:
            return np.empty((0, self.dim), dtype=np.float32)
        table, tokenizer = self._ensure_loaded()
        encodings = tokenizer.encode_batch(items, add_special_tokens=False)
        ids = [e.ids or [self._fallback] for e in encodings]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((t for seq in ids for t in seq), dtype=np.int64, count=int(lengths.sum()))
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        # Each row is the sum of its tokens' rows (not the mean: rows are normalised next, and the count would
        # only scale them). Few tokens: gather and add. Many: a texts x vocabulary count matrix times the
        # table, which does not copy a row per token first (measured ~2x less CPU on long texts) but costs
        # ~1 ms to set up, more than a short text's whole gather.
        summed: npt.NDArray[np.float32]
        if flat.size <= _GATHER_TOKENS:
            summed = np.add.reduceat(table[flat], indptr[:-1], axis=0)
        else:
            from scipy import sparse

            counts = sparse.csr_matrix(
                (np.ones(flat.size, dtype=np.float32), flat, indptr), shape=(len(ids), len(table))
            )
            summed = np.asarray(counts @ table, dtype=np.float32)
        return normalise(summed)
