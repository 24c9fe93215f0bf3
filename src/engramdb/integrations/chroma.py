"""Migration from ChromaDB (``pip install "engramdb[chroma]"``; CLI: ``engram import chroma PATH``).

>>> from engramdb import Engram
>>> from engramdb.integrations.chroma import import_chroma
>>> with Engram("./memory") as mem:                                      # doctest: +SKIP
...     report = import_chroma(mem, "./chroma", agent="surfer", dry_run=True)
...     print(report.to_dict())

:func:`import_chroma` reads a Chroma persist directory (the folder ``chromadb.PersistentClient(path=...)``
wrote, with its ``chroma.sqlite3``) offline: telemetry off, and no embedding function is ever loaded or
called. Every record of every collection with a document becomes one memory of ``agent``:

- content: the document (records without a document have nothing to search and are skipped, and counted);
- metadata: the record's Chroma metadata, plus ``chroma_id`` (its id) and ``chroma_collection``;
- tags: the collection's name; kind: by the collection's known shape (see
  :mod:`~engramdb.integrations._chroma_shapes`): seed 004's task patterns become patterns ``recall_patterns``
  finds, seed 003's error resolutions failures with their fix (``mem.failures.solutions``), code patterns
  ``code_pattern`` memories; any other collection ``knowledge``. An explicit ``kind`` imports every collection
  as plain memories of that kind. ``collections`` chooses which collections come (default: all).

By default vectors are not copied: Chroma's are usually made by another embedding model (its default MiniLM,
or OpenAI's, ...) and vectors of two models cannot be compared, so every document is embedded again with the
store's model; the report says which model the collection used and how many documents were re-embedded.
With ``reuse_vectors=True`` (CLI ``--reuse-vectors``) the user says the collections were embedded with the
store's model; that is checked before anything is written (the vectors' dimension must be the model's, and
a sample of documents, re-embedded, must match their stored vectors to a cosine of at least
``tolerance``, default :data:`REUSE_MIN_COSINE`), else ValidationError. The checked vectors then stand in
for the model: they seed the store embedder's cache (:meth:`~engramdb.embeddings.CachedEmbedder.prime`),
so a document stored unchanged is not embedded again, while one that redaction changed is. Writes go through
:meth:`Engram.remember_many` (secrets redacted, every write audited), in batches. Records imported before
(same collection and ``chroma_id`` for the same agent) are skipped, so an interrupted import can simply be run
again. ``dry_run=True`` reports per collection what would come and writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from engramdb import validate as check
from engramdb.errors import EngramError, StorageError, ValidationError
from engramdb.integrations._chroma_shapes import (
    FailureRecord,
    Shape,
    code_pattern_item,
    failure_record,
    pattern_item,
    shape_of,
)
from engramdb.toolkit import redacted

if TYPE_CHECKING:
    import os

    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from engramdb import Engram
    from engramdb.embeddings import CachedEmbedder

__all__ = ["REUSE_MIN_COSINE", "ChromaImportReport", "CollectionImport", "import_chroma"]

#: Records read from Chroma (and written to engramdb) per batch.
BATCH: Final = 256
#: ``reuse_vectors``: the least cosine between a sampled document's stored and re-embedded vector. The same
#: model on another machine or runtime differs in the last float digits (cosine > 0.999); another model
#: of the same dimension does not come near.
REUSE_MIN_COSINE: Final = 0.99
#: ``reuse_vectors``: how many documents per collection are re-embedded to check the vectors' model.
REUSE_SAMPLE: Final = 8
_EXISTING_PAGE: Final = 1000

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectionImport:
    """What one Chroma collection held and what came (or, in a dry run, would come) from it."""

    name: str
    #: Records in the collection.
    records: int
    #: Memories written (dry run: that would be written).
    imported: int
    #: Records already imported by an earlier run (same agent, collection and chroma_id).
    already_imported: int
    #: Records without a document: nothing to search, not imported.
    without_document: int
    #: The embedding function the collection was configured with, if Chroma recorded one.
    source_embedding: str | None
    #: The dimension of the collection's vectors (None for an empty collection).
    source_dimension: int | None
    #: ``reuse_vectors``: the least cosine between stored and re-embedded vectors of the sampled documents
    #: (None when vectors are not reused or nothing was sampled).
    sample_cosine: float | None = None
    #: What the collection was taken for: ``patterns``, ``failures``, ``code_patterns`` or ``plain``.
    shape: Shape = "plain"
    #: Records of a failures collection whose fix could not be found, imported as plain memories.
    plain: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "shape": self.shape,
            "plain": self.plain,
            "records": self.records,
            "imported": self.imported,
            "already_imported": self.already_imported,
            "without_document": self.without_document,
            "source_embedding": self.source_embedding,
            "source_dimension": self.source_dimension,
            "sample_cosine": self.sample_cosine,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ChromaImportReport:
    """The result of :func:`import_chroma`: per collection, and the embedding model documents were embedded with."""

    path: str
    agent: str
    dry_run: bool
    #: The engramdb embedding model every imported document is (or would be) embedded with.
    model: str
    collections: list[CollectionImport] = field(default_factory=list)
    #: Whether the collections' vectors were (dry run: would be) reused instead of re-embedding.
    reuse_vectors: bool = False
    #: Documents whose stored vector was used (their stored content was the document as is); the rest were
    #: embedded (0 without ``reuse_vectors`` and in a dry run).
    reused: int = 0

    @property
    def imported(self) -> int:
        """Memories written (dry run: that would be written), over all collections."""
        return sum(c.imported for c in self.collections)

    @property
    def records(self) -> int:
        """Records in the Chroma store, over all collections."""
        return sum(c.records for c in self.collections)

    @property
    def vectors_note(self) -> str:
        """What happened to Chroma's vectors: reused (after the check) or not, and why."""
        if self.reuse_vectors:
            cosines = [c.sample_cosine for c in self.collections if c.sample_cosine is not None]
            checked = f" (sampled documents re-embedded match them to cosine >= {min(cosines):.4f})" if cosines else ""
            if self.dry_run:
                return f"Chroma's vectors would be reused as {self.model}'s{checked}."
            embedded = self.imported - self.reused
            return (
                f"Chroma's vectors were reused as {self.model}'s{checked}: {self.reused} reused, "
                f"{embedded} document{'s' if embedded != 1 else ''} embedded (changed by redaction)."
            )
        used = [c for c in self.collections if c.records]
        dims = sorted({str(c.source_dimension) for c in used if c.source_dimension})
        names = sorted({c.source_embedding for c in used if c.source_embedding})
        about = [f"{'/'.join(dims)}-dimensional"] if dims else []
        about += [f"made by Chroma's {', '.join(names)} embedding function"] if names else []
        origin = f" ({', '.join(about)})" if about else ""
        verb = "would be" if self.dry_run else "were"
        return (
            f"Chroma's vectors{origin} are not reused: vectors of different models cannot be compared, so "
            f"{self.imported} document{'s' if self.imported != 1 else ''} {verb} embedded with {self.model}."
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "path": self.path,
            "agent": self.agent,
            "dry_run": self.dry_run,
            "model": self.model,
            "records": self.records,
            "imported": self.imported,
            "vectors": "reused" if self.reuse_vectors else "re-embedded",
            "reused": self.reused,
            "vectors_note": self.vectors_note,
            "collections": [c.to_dict() for c in self.collections],
        }


def import_chroma(
    mem: Engram,
    path: str | os.PathLike[str],
    *,
    agent: str | None = None,
    kind: str | None = None,
    collections: Sequence[str] | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    reuse_vectors: bool = False,
    tolerance: float = REUSE_MIN_COSINE,
) -> ChromaImportReport:
    """Bring every collection of the Chroma persist directory ``path`` into ``mem`` as ``agent``'s memories.

    ``agent`` defaults to ``"default"``. ``progress(done, total)`` is called after each batch (``total``:
    records with a document over all collections). A path that is not a Chroma persist directory raises
    :class:`~engramdb.errors.ValidationError`; a store Chroma cannot read raises
    :class:`~engramdb.errors.StorageError`. Bad records (e.g. an empty document) raise ValidationError
    naming the collection and id; batches written before stay (run it again to continue).

    ``reuse_vectors``: use the collections' stored vectors instead of embedding the documents again (see the
    module docstring); checked on every collection before anything is written, ValidationError if they are
    not the store model's (``tolerance``: the least cosine a sampled document may have with its vector).

    ``kind`` None maps each collection by its known shape (patterns, failures, code patterns; the rest
    ``knowledge``); a kind imports every collection as plain memories of it. ``collections`` names the
    collections to import (ValidationError, listing the store's, for a name it does not have).
    """
    owner = check.agent_name("default" if agent is None else agent)
    plain_kind = check.kind("knowledge" if kind is None else kind)
    reuse_vectors = check.flag(reuse_vectors, what="reuse_vectors")
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0.0 < tolerance <= 1.0:
        raise ValidationError(f"tolerance must be a cosine in (0, 1], not {tolerance!r}")
    cache = _reuse_cache(mem) if reuse_vectors else None
    client = _open(path)
    report = ChromaImportReport(
        path=str(path), agent=owner, dry_run=dry_run, model=mem.embedder.model_id, reuse_vectors=reuse_vectors
    )
    chosen = [_collection(client, name) for name in _chosen(_collection_names(client), collections)]
    plans = [_Plan(c, _existing_ids(mem, owner, c.name), mapped=kind is None) for c in chosen]
    cosines = {p.name: _checked_cosine(mem, p, tolerance) for p in plans} if reuse_vectors else {}
    total = sum(p.pending for p in plans)
    done = reused = 0
    for plan in plans:
        imported = 0
        if not dry_run:
            for items, vectors, failures in plan.batches(owner, plain_kind, with_vectors=cache is not None):
                if cache is not None and items:
                    reused += _write_reusing(mem, cache, items, vectors)
                elif items:
                    mem.remember_many(items, force=True)
                for failure in failures:
                    _record_failure(mem, owner, plan.name, failure)
                imported += len(items) + len(failures)
                done += len(items) + len(failures)
                if progress is not None:
                    progress(done, total)
        report.collections.append(
            CollectionImport(
                name=plan.name,
                records=plan.records,
                imported=plan.pending if dry_run else imported,
                already_imported=plan.already,
                without_document=plan.empty,
                source_embedding=plan.source_embedding,
                source_dimension=plan.dimension,
                sample_cosine=cosines.get(plan.name),
                shape=plan.shape,
                plain=plan.plain,
            )
        )
    return dataclasses.replace(report, reused=reused)


def _chosen(names: list[str], wanted: Sequence[str] | None) -> list[str]:
    """The collections to import: all, or those ``wanted`` (each must exist)."""
    if wanted is None:
        return names
    if isinstance(wanted, str) or not all(isinstance(w, str) and w.strip() for w in wanted):
        raise ValidationError("collections must be a list of collection names")
    missing = [w for w in wanted if w.strip() not in names]
    if missing:
        have = ", ".join(names) or "none"
        raise ValidationError(f"no collection {missing[0].strip()!r} in the Chroma store (it has: {have})")
    return [n for n in names if n in {w.strip() for w in wanted}]


def _record_failure(mem: Engram, agent: str, collection: str, failure: tuple[str, FailureRecord]) -> None:
    record_id, rec = failure
    mem.failures.record(
        rec.error,
        agent=agent,
        context=rec.context,
        solution=rec.solution,
        failed_solutions=rec.failed_solutions,
        tags=[collection],
        metadata={**_json_metadata(rec.metadata), "chroma_id": record_id, "chroma_collection": collection},
    )


# -- reusing the collections' vectors -------------------------------------------------------------------------
def _reuse_cache(mem: Engram) -> CachedEmbedder:
    """The store embedder's cache, which the checked vectors seed; ValidationError if there is none."""
    from engramdb.embeddings import CachedEmbedder

    embedder = mem.embedder
    if not isinstance(embedder, CachedEmbedder) or embedder.size < 1:
        raise ValidationError(
            "reuse_vectors needs the store's embedder cache (setting embed_cache_size > 0, the default embedder); "
            "import without reuse_vectors to embed every document"
        )
    return embedder


def _checked_cosine(mem: Engram, plan: _Plan, tolerance: float) -> float | None:
    """The least cosine between stored and re-embedded vectors of a sample of ``plan``'s documents.

    ValidationError when the vectors' dimension is not the model's or a sampled document is further from its
    vector than ``tolerance``: the vectors then come from another model, and searches would mix two spaces.
    """
    if not plan.pending:
        return None
    dim = mem.embedder.dim
    if plan.dimension != dim:
        raise ValidationError(
            f"collection {plan.name!r}: its vectors have {plan.dimension} dimensions, {mem.embedder.model_id}'s "
            f"{dim}; they cannot be reused (import without reuse_vectors to embed the documents again)"
        )
    policy = mem.redaction
    # Only documents redaction leaves as they are: the others are embedded redacted anyway, and a secret
    # must not reach the embedder (it may be a remote API) before redaction, not even for this check.
    texts, stored = plan.sample(
        REUSE_SAMPLE, keep=lambda text: not policy.enabled or redacted(text, policy=policy) == text
    )
    if not texts:
        return None
    fresh = mem.embedder.embed(texts)
    unit = stored / np.maximum(np.linalg.norm(stored, axis=1, keepdims=True), 1e-12)
    cosines = np.sum(unit * fresh, axis=1)
    worst = float(cosines.min())
    if worst < tolerance:
        raise ValidationError(
            f"collection {plan.name!r}: its vectors are not {mem.embedder.model_id}'s (a sampled document's "
            f"stored vector has cosine {worst:.3f} with its embedding; at least {tolerance} is needed); import "
            "without reuse_vectors to embed the documents again"
        )
    return worst


def _write_reusing(mem: Engram, cache: CachedEmbedder, items: list[dict[str, Any]], vectors: Any) -> int:
    """Write one batch with the documents' vectors seeded in the embedder's cache; how many were reused."""
    # At most the cache's size at a time, so every seeded vector is still there when the batch is embedded.
    reused = 0
    step = min(len(items), cache.size)
    for start in range(0, len(items), step):
        part = items[start : start + step]
        cache.prime([i["content"] for i in part], vectors[start : start + step])
        before = cache.cache_info().hits
        mem.remember_many(part, force=True)
        # With background vectors the queue's worker embeds the part: wait for it (it finds the seeded
        # vectors, so it does not run the model), so the next part's seeds cannot push these out first.
        mem.flush()
        reused += min(len(part), cache.cache_info().hits - before)
    return reused


# -- reading Chroma -------------------------------------------------------------------------------------------
def _open(path: str | os.PathLike[str]) -> ClientAPI:
    """A Chroma client on an existing persist directory (Chroma itself would create a new, empty one)."""
    folder = Path(path)
    try:
        exists = folder.exists()
    except (OSError, ValueError) as exc:  # a name the file system refuses (over 255 bytes, a NUL)
        raise ValidationError(f"no Chroma store at {str(folder)!r}: {exc}") from None
    if not exists:
        raise ValidationError(f"no Chroma store at {folder}: the path does not exist")
    if not folder.is_dir():
        raise ValidationError(f"{folder} is not a Chroma persist directory (it is a file; give its folder)")
    if not (folder / "chroma.sqlite3").is_file():
        raise ValidationError(f"{folder} is not a Chroma persist directory (it has no chroma.sqlite3)")
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:
        raise EngramError("importing from Chroma needs chromadb: pip install 'engramdb[chroma]'") from exc
    try:
        return chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False))
    except Exception as exc:
        raise StorageError(f"cannot open the Chroma store at {folder}: {_one_line(exc)}") from exc


def _collection_names(client: ClientAPI) -> list[str]:
    try:
        return sorted(c.name for c in client.list_collections())
    except Exception as exc:
        raise StorageError(f"cannot list the Chroma collections: {_one_line(exc)}") from exc


def _collection(client: ClientAPI, name: str) -> Collection:
    try:
        # No embedding function: nothing here embeds, so nothing is downloaded or called.
        return client.get_collection(name, embedding_function=None)
    except Exception as exc:
        raise StorageError(f"cannot open the Chroma collection {name!r}: {_one_line(exc)}") from exc


def _source_embedding(collection: Collection) -> str | None:
    """The name of the embedding function the collection was created with, as Chroma recorded it."""
    try:
        config = collection.configuration_json
        ef = config.get("embedding_function") if isinstance(config, Mapping) else None
        name = ef.get("name") if isinstance(ef, Mapping) else None
    except (AttributeError, KeyError, TypeError, ValueError):  # an older store without a recorded configuration
        return None
    return str(name) if name else None


class _Plan:
    """One collection: its counts (read once, up front) and its records to import, batch by batch."""

    def __init__(self, collection: Collection, existing: set[str], *, mapped: bool = True) -> None:
        self.collection = collection
        self.name = collection.name
        self.existing = existing
        self.source_embedding = _source_embedding(collection)
        self.records = self.already = self.empty = self.pending = self.plain = 0
        self.shape: Shape = "plain"
        first = True
        for ids, documents, metadatas, _ in self._pages(["documents", "metadatas"]):
            if first and mapped:
                self.shape = shape_of(self.name, metadatas)
            first = False
            for record_id, document, metadata in zip(ids, documents, metadatas, strict=True):
                self.records += 1
                if record_id in existing:
                    self.already += 1
                elif document is None:
                    self.empty += 1
                else:
                    self.pending += 1
                    no_fix = self.shape == "failures" and failure_record(document, metadata or {}) is None
                    self.plain += no_fix
        self.dimension = self._dimension() if self.records else None

    def _dimension(self) -> int | None:
        """The length of the collection's vectors (read from one record)."""
        try:
            page = self.collection.get(include=["embeddings"], limit=1)
        except Exception as exc:
            raise StorageError(f"cannot read the Chroma collection {self.name!r}: {_one_line(exc)}") from exc
        vectors = page.get("embeddings")
        return len(vectors[0]) if vectors is not None and len(vectors) else None

    def sample(self, size: int, *, keep: Callable[[str], bool]) -> tuple[list[str], npt.NDArray[np.float32]]:
        """Up to ``size`` pending documents that ``keep`` accepts and their stored vectors, spread over the
        collection."""
        texts: list[str] = []
        rows: list[Any] = []
        stride = max(1, self.pending // size)
        seen = 0
        for ids, documents, _, vectors in self._pages(["documents", "embeddings"]):
            for record_id, document, vec in zip(ids, documents, vectors, strict=True):
                if record_id in self.existing or not isinstance(document, str) or not document.strip():
                    continue
                if not keep(document):
                    continue
                if seen % stride == 0 and len(texts) < size:
                    texts.append(document)
                    rows.append(vec)
                seen += 1
            if len(texts) >= size:
                break
        return texts, np.asarray(rows, dtype=np.float32)

    def _pages(self, include: list[Any]) -> Iterator[tuple[list[str], list[str | None], list[Any], list[Any]]]:
        """(ids, documents, metadatas, embeddings) of the collection, one page of :data:`BATCH` records at a
        time (a part not in ``include`` is a list of None)."""
        offset = 0
        while True:
            try:
                page = self.collection.get(include=include, limit=BATCH, offset=offset)
            except Exception as exc:
                raise StorageError(f"cannot read the Chroma collection {self.name!r}: {_one_line(exc)}") from exc
            ids = list(page["ids"])
            if not ids:
                return
            no_values: list[Any] = [None] * len(ids)
            documents: list[str | None] = list(page.get("documents") or no_values)
            metadatas: list[Any] = list(page.get("metadatas") or no_values)
            found = page.get("embeddings")
            embeddings: list[Any] = list(found) if found is not None else no_values
            yield ids, documents, metadatas, embeddings
            if len(ids) < BATCH:
                return
            offset += len(ids)

    def batches(
        self, agent: str, kind: str, *, with_vectors: bool = False
    ) -> Iterator[tuple[list[dict[str, Any]], list[Any], list[tuple[str, FailureRecord]]]]:
        """The records to import, one page read at a time: ``remember_many`` items with their stored vectors
        row for row (``with_vectors``; else Nones), and the failures to record (id, record)."""
        include: list[Any] = ["documents", "metadatas", "embeddings"] if with_vectors else ["documents", "metadatas"]
        for ids, documents, metadatas, embeddings in self._pages(include):
            items = []
            kept: list[Any] = []
            failures: list[tuple[str, FailureRecord]] = []
            for record_id, document, metadata, vec in zip(ids, documents, metadatas, embeddings, strict=True):
                if record_id in self.existing or document is None:
                    continue
                if not isinstance(document, str) or not document.strip():
                    raise ValidationError(
                        f"collection {self.name!r}, record {record_id!r}: the document is empty; nothing to import"
                    )
                meta = _json_metadata(metadata)
                failure = failure_record(document, meta) if self.shape == "failures" else None
                if failure is not None:
                    failures.append((record_id, failure))
                    continue
                item = self._item(document, meta, kind)
                item["agent"] = agent
                item["tags"] = [*item.get("tags", []), self.name]
                item["metadata"] = {**item["metadata"], "chroma_id": record_id, "chroma_collection": self.name}
                items.append(item)
                kept.append(vec)
            if items or failures:
                yield items, kept, failures

    def _item(self, document: str, meta: dict[str, Any], kind: str) -> dict[str, Any]:
        if self.shape == "patterns":
            return pattern_item(document, meta)
        if self.shape == "code_patterns":
            return code_pattern_item(document, meta)
        return {"content": document, "kind": kind, "metadata": meta}


def _json_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Chroma metadata as JSON values (scalars and lists of scalars; a non-finite number becomes text)."""
    out: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        out[str(key)] = _json_value(value)
    return out


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Sequence):
        return [_json_value(v) for v in value]
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return str(value)


# -- what is there already ------------------------------------------------------------------------------------
def _existing_ids(mem: Engram, agent: str, collection: str) -> set[str]:
    """The chroma ids of ``collection`` already imported for ``agent``."""
    out: set[str] = set()
    offset = 0
    while True:
        page = mem.list(agent=agent, tags=[collection], limit=_EXISTING_PAGE, offset=offset)
        for m in page:
            if m.agent == agent and m.metadata.get("chroma_collection") == collection:
                chroma_id = m.metadata.get("chroma_id")
                if isinstance(chroma_id, str):
                    out.add(chroma_id)
        if len(page) < _EXISTING_PAGE:
            return out
        offset += len(page)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
