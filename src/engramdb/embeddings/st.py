"""Embeddings from a sentence-transformers model (optional; needs torch).

Install with ``pip install 'engramdb[sentence-transformers]'``. The package (and
torch, several seconds to import) is imported on the first :meth:`embed`, never at
construction. Models are loaded from local files only unless ``allow_download=True``:
engramdb does not reach the network behind the user's back.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engramdb.embeddings._common import check_texts, normalise, one_line
from engramdb.errors import ConfigError, EmbeddingError

__all__ = ["SentenceTransformerEmbedder"]

_MISSING = "the sentence-transformers embedder needs its extra: pip install 'engramdb[sentence-transformers]'"


def _installed() -> bool:
    try:
        return importlib.util.find_spec("sentence_transformers") is not None
    except (ImportError, ValueError):  # a broken or half-imported install
        return False


class SentenceTransformerEmbedder:
    """A sentence-transformers model: unit-norm float32 vectors, ``model_id`` = "sentence-transformers:<name>".

    ``model_name_or_path`` is a Hugging Face model name already in the local cache,
    or a folder holding a saved model. ``device`` defaults to the CPU. Raises
    :class:`~engramdb.errors.EmbeddingError` at construction if the package is not
    installed, and on the first :meth:`embed` if the model cannot be loaded.
    Thread-safe: calls into the model are serialised.
    """

    def __init__(
        self,
        model_name_or_path: str,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        allow_download: bool = False,
        model_id: str | None = None,
    ) -> None:
        if not isinstance(model_name_or_path, str) or not model_name_or_path.strip():
            raise ConfigError(
                "the sentence-transformers embedder needs a model, e.g. 'sentence-transformers:all-MiniLM-L6-v2'"
            )
        if batch_size < 1:
            raise ConfigError("batch_size must be at least 1")
        if not _installed():
            raise EmbeddingError(_MISSING)
        self.model_name_or_path = model_name_or_path.strip()
        self.model_id = model_id or f"sentence-transformers:{self.model_name_or_path}"
        self.device = device
        self.batch_size = batch_size
        self.allow_download = allow_download
        self._model: Any = None
        self._dim: int | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model_name_or_path!r}, device={self.device!r})"

    @property
    def dim(self) -> int:
        """Vector dimension, read from the model (loading it if needed)."""
        if self._dim is None:
            with self._lock:
                model = self._load()
                if self._dim is None:
                    self._dim = _model_dim(model) or int(self._encode(model, ["dimension probe"]).shape[1])
        return self._dim

    @dim.setter
    def dim(self, value: int) -> None:
        self._dim = value

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EmbeddingError(f"{_MISSING} ({one_line(exc)})") from exc
                try:
                    self._model = SentenceTransformer(
                        self.model_name_or_path, device=self.device, local_files_only=not self.allow_download
                    )
                except Exception as exc:
                    hint = (
                        ""
                        if self.allow_download
                        else "; it must be in the local Hugging Face cache or a saved-model folder"
                        " (engramdb never downloads on its own: pass allow_download=True to allow it)"
                    )
                    raise EmbeddingError(
                        f"cannot load sentence-transformers model {self.model_name_or_path!r}: {one_line(exc)}{hint}"
                    ) from exc
            return self._model

    def _encode(self, model: Any, items: list[str]) -> npt.NDArray[np.float32]:
        try:
            vectors = model.encode(
                items,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise EmbeddingError(
                f"sentence-transformers model {self.model_name_or_path!r} failed: {one_line(exc)}"
            ) from exc
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(items):
            raise EmbeddingError(f"sentence-transformers returned shape {matrix.shape} for {len(items)} texts")
        return matrix

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: shape (len(texts), dim), float32, unit-norm rows."""
        items = check_texts(texts)
        if not items:
            return np.empty((0, self.dim), dtype=np.float32)
        with self._lock:
            matrix = self._encode(self._load(), items)
            if self._dim is None:
                self._dim = int(matrix.shape[1])
        if matrix.shape[1] != self._dim:
            raise EmbeddingError(f"sentence-transformers returned {matrix.shape[1]}-d vectors, expected {self._dim}")
        # Normalised again in float32: cheap, and some models ignore normalize_embeddings.
        return normalise(matrix)


def _model_dim(model: Any) -> int | None:
    # The long name is the documented one; try the short one too, in case a version renames it.
    for name in ("get_sentence_embedding_dimension", "get_embedding_dimension"):
        method = getattr(model, name, None)
        if callable(method):
            value = method()
            if isinstance(value, int) and value > 0:
                return value
    return None
