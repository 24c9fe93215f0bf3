"""Embedding providers, and :func:`make_embedder` to pick one from settings.

==============================  =========================================================
``embedder`` setting            provider
==============================  =========================================================
``local`` (default)             :class:`LocalEmbedder`: all-MiniLM-L6-v2 int8 ONNX, offline
``local:<max tokens>``          the same model reading at most that many tokens (16 to 512;
                                ``local:128`` embeds long texts ~2x faster, see
                                bench/embedders.py; its own model id, so ``reembed``)
``static`` / ``static:<dims>``  :class:`~engramdb.embeddings.static.StaticEmbedder`: a token
                                table distilled from the same model (model2vec's recipe),
                                ~100x faster, lower recall (bench/RESULTS.md); derived on
                                first use into ``<home>/embeddings``; 256-d by default
``mpnet`` (``mpnet:int8``)      :class:`~engramdb.embeddings.mpnet_onnx.MpnetInt8Embedder`: all-mpnet-base-v2
                                (768-d) from the ``mpnet`` extra's packages as an int8 ONNX graph
                                built on first use; better recall, ~5x the CPU per text
                                (bench/RESULTS.md, "Issue 21, models, second round")
``mpnet:fp32``                  :class:`~engramdb.embeddings.mpnet.MpnetEmbedder`: the same model in fp32,
                                numpy forward pass (no ``onnx`` needed; ~5x slower per query)
``sentence-transformers:<m>``   :class:`~engramdb.embeddings.st.SentenceTransformerEmbedder`
``openai:<model>``              :class:`~engramdb.embeddings.openai.OpenAIEmbedder` at
                                ``openai_base_url`` (OpenAI, Ollama, vLLM, LM Studio, ...)
==============================  =========================================================

Every provider is wrapped in a :class:`CachedEmbedder`. Importing this package loads
neither onnxruntime, torch nor httpx; each is imported when first needed.
"""

from __future__ import annotations

from engramdb.config import Settings
from engramdb.embeddings.base import Embedder
from engramdb.embeddings.cache import CachedEmbedder, CacheInfo
from engramdb.embeddings.local import MAX_TOKENS, LocalEmbedder, count_tokens
from engramdb.embeddings.query import QueryCache
from engramdb.errors import ConfigError

__all__ = ["CacheInfo", "CachedEmbedder", "Embedder", "LocalEmbedder", "QueryCache", "count_tokens", "make_embedder"]

_KINDS = (
    "'local', 'local:<max tokens>', 'static', 'static:<dims>', 'mpnet', 'mpnet:fp32', "
    "'sentence-transformers:<model>' or 'openai:<model>'"
)


def make_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings.embedder`` names, wrapped in a cache of ``settings.embed_cache_size``.

    Raises :class:`~engramdb.errors.ConfigError` for an unknown or incomplete name;
    nothing is loaded or contacted until the first embedding.
    """
    spec = settings.embedder.strip()
    kind, colon, name = spec.partition(":")
    name = name.strip()
    inner: Embedder
    if kind == "local" and (not colon or name.isdigit()):
        max_tokens = int(name) if colon else MAX_TOKENS
        inner = LocalEmbedder(
            settings.model_path,
            sha256=settings.model_sha256,
            batch_size=settings.embed_batch_size,
            max_tokens=max_tokens,
        )
    elif kind == "static" and (not colon or name.isdigit()):
        from engramdb.embeddings.static import DEFAULT_STATIC_DIMS, StaticEmbedder

        inner = StaticEmbedder(
            dims=int(name) if colon else DEFAULT_STATIC_DIMS,
            cache_dir=settings.home / "embeddings",
            model_path=settings.model_path,
            sha256=settings.model_sha256,
        )
    elif spec in ("mpnet", "mpnet:int8"):
        from engramdb.embeddings.mpnet_onnx import MpnetInt8Embedder

        inner = MpnetInt8Embedder(cache_dir=settings.home / "embeddings")
    elif spec == "mpnet:fp32":
        from engramdb.embeddings.mpnet import MpnetEmbedder

        inner = MpnetEmbedder(cache_dir=settings.home / "embeddings", batch_size=settings.embed_batch_size)
    elif kind == "sentence-transformers" and name:
        from engramdb.embeddings.st import SentenceTransformerEmbedder

        inner = SentenceTransformerEmbedder(name, batch_size=settings.embed_batch_size)
    elif kind == "openai" and name:
        from engramdb.embeddings.openai import OpenAIEmbedder

        inner = OpenAIEmbedder(
            name,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            batch_size=settings.embed_batch_size,
        )
    elif kind in ("sentence-transformers", "openai"):
        raise ConfigError(f"embedder {spec!r} names no model: use {kind}:<model>")
    else:
        raise ConfigError(f"unknown embedder {spec!r}: use {_KINDS}")
    return CachedEmbedder(inner, size=settings.embed_cache_size)
